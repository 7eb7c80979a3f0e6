#include "worker/round_assembler.h"

#include <catch2/catch.hpp>
#include <deque>
#include <optional>
#include <vector>

#include "common/element_cost.h"
#include "sluice/tensor.h"

namespace sluice::worker {
namespace {

using ElementsReply = RoundAssembler::ElementsReply;

constexpr absl::Time kLater = absl::InfiniteFuture();

// Elements holding the int64 scalars first, first + 1, ..., first + count - 1.
std::deque<Element> Range(int64_t first, int64_t count) {
  std::deque<Element> elements;
  for (int64_t i = first; i < first + count; ++i) elements.push_back(Element::Of(Tensor::Scalar<int64_t>(i)));
  return elements;
}

int64_t Value(const Element& element) { return element.components.at(0).data<int64_t>()[0]; }

// Records the replies of parked requests, each in its own slot.
class Replies {
 public:
  // A callback that keeps its reply in slot `slot`.
  RoundAssembler::ElementsCallback To(size_t slot) {
    if (replies_.size() <= slot) replies_.resize(slot + 1);
    return [this, slot](ElementsReply reply) { replies_[slot] = std::move(reply); };
  }
  // Calls the answers' callbacks, as the owner does once its lock is released.
  void Deliver(RoundAssembler::Answers* answers) {
    for (auto& [done, reply] : *answers) done(std::move(reply));
    answers->clear();
  }
  const std::optional<ElementsReply>& at(size_t slot) const { return replies_.at(slot); }
  // The one element that slot `slot`'s reply carries.
  int64_t ValueAt(size_t slot) const {
    REQUIRE(at(slot).has_value());
    REQUIRE(at(slot)->status.ok());
    REQUIRE(at(slot)->elements.size() == 1);
    return Value(at(slot)->elements[0]);
  }
  // The elements of slots 0, 1, ..., count - 1.
  std::vector<int64_t> Values(size_t count) const {
    std::vector<int64_t> values;
    for (size_t slot = 0; slot < count; ++slot) values.push_back(ValueAt(slot));
    return values;
  }

 private:
  std::vector<std::optional<ElementsReply>> replies_;
};

// Parks consumer `consumer`'s request for `round`, its reply to go to
// slot `slot`, with no deadline.
void Ask(RoundAssembler& rounds, int64_t round, int64_t consumer, Replies& replies, size_t slot,
         bool others_past = false) {
  rounds.Wait(round, consumer, others_past, proto::COMPRESSION_NONE, kLater, replies.To(slot));
}

// Assembles from `buffer` with the pipeline still running, and delivers.
RoundAssembler::Taken AssembleRunning(RoundAssembler& rounds, std::deque<Element>* buffer, Replies& replies) {
  RoundAssembler::Answers answers;
  const RoundAssembler::Taken taken = rounds.Assemble(buffer, false, absl::OkStatus(), &answers);
  replies.Deliver(&answers);
  return taken;
}

// Ask, then AssembleRunning; returns the elements taken.
int64_t AskAndAssemble(RoundAssembler& rounds, int64_t round, int64_t consumer, std::deque<Element>* buffer,
                       Replies& replies, size_t slot) {
  Ask(rounds, round, consumer, replies, slot);
  return AssembleRunning(rounds, buffer, replies).elements;
}

TEST_CASE("a round waits for every consumer, then gives consumer c the c-th element") {
  RoundAssembler rounds(/*task_id=*/7, /*num_consumers=*/3);
  std::deque<Element> buffer = Range(0, 5);
  Replies replies;
  rounds.Wait(0, 2, false, proto::COMPRESSION_SNAPPY, kLater, replies.To(2));
  Ask(rounds, 0, 0, replies, 0);
  RoundAssembler::Taken taken = AssembleRunning(rounds, &buffer, replies);
  CHECK(taken.elements == 0);
  CHECK(buffer.size() == 5);
  CHECK_FALSE(replies.at(0).has_value());
  CHECK(rounds.assembled_rounds() == 0);

  Ask(rounds, 0, 1, replies, 1);
  taken = AssembleRunning(rounds, &buffer, replies);
  CHECK(taken.elements == 3);
  // Three int64 scalars, weighed as the task's buffer weighs them.
  CHECK(taken.bytes == 3 * ElementCost(Element::Of(Tensor::Scalar<int64_t>(0))));
  CHECK(rounds.assembled_rounds() == 1);
  CHECK(replies.Values(3) == std::vector<int64_t>{0, 1, 2});
  CHECK(replies.at(2)->compression == proto::COMPRESSION_SNAPPY);
  CHECK_FALSE(replies.at(0)->end_of_sequence);
  REQUIRE(buffer.size() == 2);
  CHECK(Value(buffer.front()) == 3);
}

TEST_CASE("the same consumer waiting twice counts once, and both its requests are answered") {
  RoundAssembler rounds(7, 3);
  std::deque<Element> buffer = Range(0, 3);
  Replies replies;
  Ask(rounds, 0, 0, replies, 0);
  Ask(rounds, 0, 0, replies, 1);
  CHECK(AskAndAssemble(rounds, 0, 1, &buffer, replies, 2) == 0);
  CHECK(AskAndAssemble(rounds, 0, 2, &buffer, replies, 3) == 3);
  CHECK(replies.Values(4) == std::vector<int64_t>{0, 0, 1, 2});
}

TEST_CASE("a request that ran out no longer counts as waiting") {
  RoundAssembler rounds(7, 3);
  std::deque<Element> buffer = Range(0, 3);
  Replies replies;
  const absl::Time start = absl::UnixEpoch();
  Ask(rounds, 0, 0, replies, 0);
  rounds.Wait(0, 1, false, proto::COMPRESSION_ZSTD, start + absl::Milliseconds(50), replies.To(1));

  RoundAssembler::Answers expired;
  rounds.Expire(start + absl::Milliseconds(49), &expired);
  CHECK(expired.empty());
  rounds.Expire(start + absl::Milliseconds(50), &expired);  // a deadline of now has passed
  REQUIRE(expired.size() == 1);
  replies.Deliver(&expired);
  // Answered empty: no elements, no error, not the end.
  REQUIRE(replies.at(1).has_value());
  CHECK(replies.at(1)->status.ok());
  CHECK(replies.at(1)->elements.empty());
  CHECK_FALSE(replies.at(1)->end_of_sequence);
  CHECK(replies.at(1)->compression == proto::COMPRESSION_ZSTD);

  // Consumers 0 and 2 wait; 1 does not, so the round is not assembled.
  CHECK(AskAndAssemble(rounds, 0, 2, &buffer, replies, 2) == 0);
  CHECK_FALSE(replies.at(0).has_value());

  CHECK(AskAndAssemble(rounds, 0, 1, &buffer, replies, 3) == 3);
  CHECK(replies.ValueAt(0) == 0);
  CHECK(replies.ValueAt(2) == 2);
  CHECK(replies.ValueAt(3) == 1);
}

TEST_CASE("a round asked again is answered from the kept copy") {
  RoundAssembler rounds(7, 3);
  std::deque<Element> buffer = Range(0, 6);
  Replies replies;
  for (int64_t c = 0; c < 3; ++c) Ask(rounds, 0, c, replies, c);
  CHECK(AssembleRunning(rounds, &buffer, replies).elements == 3);

  // Consumer 1's answer was lost: it asks round 0 again.
  Ask(rounds, 0, 1, replies, 3);
  const RoundAssembler::Taken taken = AssembleRunning(rounds, &buffer, replies);
  CHECK(taken.elements == 0);
  CHECK(taken.bytes == 0);
  CHECK(replies.ValueAt(3) == 1);
  CHECK(buffer.size() == 3);
  CHECK(rounds.assembled_rounds() == 1);
}

TEST_CASE("others_past assembles a round without every consumer waiting") {
  RoundAssembler rounds(7, 3);
  std::deque<Element> buffer = Range(10, 3);
  Replies replies;
  // Consumer 2 says another consumer already has its element of round 4.
  Ask(rounds, 4, 2, replies, 2, /*others_past=*/true);
  CHECK(AssembleRunning(rounds, &buffer, replies).elements == 3);
  CHECK(replies.ValueAt(2) == 12);
  CHECK(buffer.empty());
  // The others, asking later, get theirs from the kept copy.
  CHECK(AskAndAssemble(rounds, 4, 0, &buffer, replies, 0) == 0);
  CHECK(replies.ValueAt(0) == 10);
}

TEST_CASE("rounds ready at once are assembled in round order") {
  RoundAssembler rounds(7, 2);
  std::deque<Element> buffer;
  Replies replies;
  for (int64_t c = 0; c < 2; ++c) {
    Ask(rounds, 1, c, replies, 2 + c);
    Ask(rounds, 0, c, replies, c);
  }
  // Nothing buffered yet: the requests stay parked.
  CHECK(AssembleRunning(rounds, &buffer, replies).elements == 0);
  CHECK_FALSE(replies.at(0).has_value());

  buffer = Range(0, 4);
  CHECK(AssembleRunning(rounds, &buffer, replies).elements == 4);
  CHECK(replies.Values(4) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(rounds.assembled_rounds() == 2);
}

TEST_CASE("a round the ended pipeline cannot fill gets the end, or the pipeline's error") {
  RoundAssembler rounds(7, 3);
  Replies replies;
  for (int64_t c = 0; c < 3; ++c) Ask(rounds, 0, c, replies, c);
  Ask(rounds, 1, 0, replies, 3);
  std::deque<Element> buffer = Range(0, 2);  // one short of a round

  RoundAssembler::Answers answers;
  RoundAssembler::Taken taken = rounds.Assemble(&buffer, true, absl::OkStatus(), &answers);
  CHECK(taken.elements == 0);
  CHECK(answers.size() == 4);
  replies.Deliver(&answers);
  for (size_t slot = 0; slot < 4; ++slot) {
    REQUIRE(replies.at(slot).has_value());
    CHECK(replies.at(slot)->status.ok());
    CHECK(replies.at(slot)->elements.empty());
    CHECK(replies.at(slot)->end_of_sequence);
  }
  CHECK(buffer.size() == 2);

  Ask(rounds, 2, 1, replies, 4);
  rounds.Assemble(&buffer, true, absl::DataLossError("bad record"), &answers);
  replies.Deliver(&answers);
  REQUIRE(replies.at(4).has_value());
  CHECK(replies.at(4)->status == absl::DataLossError("bad record"));
  CHECK_FALSE(replies.at(4)->end_of_sequence);
}

TEST_CASE("an ended pipeline with a whole round left still waits for the consumers") {
  RoundAssembler rounds(7, 2);
  Replies replies;
  std::deque<Element> buffer = Range(0, 2);
  Ask(rounds, 0, 0, replies, 0);
  RoundAssembler::Answers answers;
  CHECK(rounds.Assemble(&buffer, true, absl::OkStatus(), &answers).elements == 0);
  CHECK(answers.empty());
  Ask(rounds, 0, 1, replies, 1);
  CHECK(rounds.Assemble(&buffer, true, absl::OkStatus(), &answers).elements == 2);
  replies.Deliver(&answers);
  CHECK(replies.Values(2) == std::vector<int64_t>{0, 1});
}

TEST_CASE("only the last kKeptRounds rounds are kept") {
  RoundAssembler rounds(7, 1);
  const auto n = static_cast<int64_t>(RoundAssembler::kKeptRounds);
  std::deque<Element> buffer = Range(0, n + 1);
  Replies replies;
  for (int64_t round = 0; round <= n; ++round) {
    CHECK(AskAndAssemble(rounds, round, 0, &buffer, replies, 0) == 1);
    CHECK(replies.ValueAt(0) == round);
  }
  CHECK(buffer.empty());
  CHECK(rounds.has_rounds());

  // Round 0 is forgotten: asked again, it waits for new elements.
  CHECK(AskAndAssemble(rounds, 0, 0, &buffer, replies, 1) == 0);
  CHECK_FALSE(replies.at(1).has_value());
  // Round 1 is kept.
  CHECK(AskAndAssemble(rounds, 1, 0, &buffer, replies, 2) == 0);
  CHECK(replies.ValueAt(2) == 1);
}

TEST_CASE("a round whose requests expired is still listed until forgotten") {
  RoundAssembler rounds(7, 2);
  CHECK_FALSE(rounds.has_rounds());
  Replies replies;
  rounds.Wait(3, 0, false, proto::COMPRESSION_NONE, absl::UnixEpoch(), replies.To(0));
  RoundAssembler::Answers expired;
  rounds.Expire(absl::UnixEpoch(), &expired);
  CHECK(expired.size() == 1);
  CHECK(rounds.has_rounds());
}

}  // namespace
}  // namespace sluice::worker
