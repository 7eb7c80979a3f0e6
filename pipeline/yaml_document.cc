#include "pipeline/yaml_document.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pipeline/yaml_keys.h"

namespace sluice {
namespace {

// Follows the events of one document and keeps, for every anchored node, how
// many nodes it holds and how deep it nests once its aliases are expanded:
// what an alias to it adds where it appears. The first problem found is kept
// and later events are ignored.
class AliasChecker : public YAML::EventHandler {
 public:
  AliasChecker(const std::string& source, std::string_view nesting_hint)
      : source_(source), nesting_hint_(nesting_hint) {}

  const absl::Status& status() const { return status_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { pending_anchor_name_ = name; }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    Leaf(mark, anchor);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapEnd() override { Close(); }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (!status_.ok()) return;
    auto found = anchors_.find(anchor);
    if (found == anchors_.end()) return;  // the parser refuses an unknown anchor itself
    Anchored& anchored = found->second;
    if (anchored.open) {
      Fail(absl::StrCat(YamlLocation(mark, source_), ": the alias *", anchored.name, " is inside the node '&",
                        anchored.name, "' names (", YamlLocation(anchored.mark, source_),
                        "), so that node would hold itself: a YAML alias may not loop"));
      return;
    }
    aliased_nodes_ += anchored.nodes;
    if (aliased_nodes_ > kMaxYamlAliasedNodes) {
      Fail(absl::StrCat(YamlLocation(mark, source_), ": the aliases of this document repeat more than ",
                        kMaxYamlAliasedNodes, " nodes (the alias *", anchored.name, " alone repeats ",
                        anchored.nodes, "): write the repeated part out, or repeat less"));
      return;
    }
    // The parser bounds the nesting it reads; an alias can add many levels
    // at once.
    const std::uint64_t depth = open_.size() + static_cast<std::uint64_t>(anchored.nesting);
    if (depth > static_cast<std::uint64_t>(kMaxYamlNesting)) {
      Fail(absl::StrCat(YamlLocation(mark, source_), ": through its aliases the YAML nests ", depth,
                        " levels deep, past its parser's limit of ", kMaxYamlNesting,
                        nesting_hint_.empty() ? "" : ": ", nesting_hint_));
      return;
    }
    Add(anchored.nodes, anchored.nesting);
  }

 private:
  struct Anchored {
    std::string name;
    YAML::Mark mark;
    std::uint64_t nodes = 0;
    int nesting = 0;
    bool open = false;
  };
  struct Collection {
    YAML::anchor_t anchor = 0;
    std::uint64_t nodes = 1;
    int nesting = 1;  // this node and the deepest node under it
  };

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (!status_.ok()) return;
    if (anchor != 0) anchors_[anchor] = Anchored{TakeAnchorName(), mark, 1, 1, false};
    Add(1, 1);
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (!status_.ok()) return;
    if (anchor != 0) anchors_[anchor] = Anchored{TakeAnchorName(), mark, 0, 0, true};
    open_.push_back(Collection{anchor});
  }

  void Close() {
    if (!status_.ok() || open_.empty()) return;
    const Collection closed = open_.back();
    open_.pop_back();
    if (closed.anchor != 0) {
      Anchored& anchored = anchors_[closed.anchor];
      anchored.nodes = closed.nodes;
      anchored.nesting = closed.nesting;
      anchored.open = false;
    }
    Add(closed.nodes, closed.nesting);
  }

  // Counts a child of `nodes` nodes, `nesting` levels deep, into the open
  // collection.
  void Add(std::uint64_t nodes, int nesting) {
    if (open_.empty()) return;
    open_.back().nodes += nodes;
    open_.back().nesting = std::max(open_.back().nesting, nesting + 1);
  }

  std::string TakeAnchorName() {
    std::string name = std::move(pending_anchor_name_);
    pending_anchor_name_.clear();
    return name;
  }

  void Fail(std::string message) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(std::move(message));
  }

  const std::string& source_;
  const std::string nesting_hint_;
  absl::Status status_;
  std::map<YAML::anchor_t, Anchored> anchors_;
  std::vector<Collection> open_;
  std::string pending_anchor_name_;
  std::uint64_t aliased_nodes_ = 0;
};

}  // namespace

absl::StatusOr<YAML::Node> LoadYamlDocument(std::string_view text, const std::string& source,
                                            std::string_view nesting_hint) {
  YAML::Node root;
  try {
    std::istringstream stream{std::string(text)};
    YAML::Parser parser(stream);
    AliasChecker checker(source, nesting_hint);
    parser.HandleNextDocument(checker);  // YAML::Load reads the first document only
    if (!checker.status().ok()) return checker.status();
    root = YAML::Load(std::string(text));
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for this is "bad file".
    return absl::InvalidArgumentError(absl::StrCat(
        YamlLocation(e.mark, source), ": the YAML nests ", e.depth(), " levels deep, its parser's limit",
        nesting_hint.empty() ? "" : ": ", std::string(nesting_hint)));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(YamlLocation(e.mark, source), ": invalid YAML: ", e.msg));
  }
  if (absl::Status status = CheckUniqueKeys(root, source); !status.ok()) return status;
  return root;
}

}  // namespace sluice
