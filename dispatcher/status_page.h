// The dispatcher's HTTP status page: one self-contained HTML document
// (inline CSS and vanilla JS, no external resources, so it works offline
// and behind firewalls) that the dispatcher serves at `/` on its
// http_port. The page fetches `status.json` (a relative URL, so it works
// behind a path-rewriting proxy too) on load and every 2 seconds, and
// renders the autoscaling advice, workers, jobs with their iterations'
// progress, datasets and recent errors. If a fetch fails it shows a banner and keeps the last data.
//
// All text from the JSON is inserted with textContent / setAttribute, never
// innerHTML, since it comes from the network (worker addresses, job names
// and error messages are user-controlled).
//
// Stable hooks for tests (tests/web/check_status_page.py): ids `workers`,
// `jobs`, `datasets`, `errors`, `updated`, `scaling` (the advice line); `data-worker="ADDRESS"` on each
// worker row; `data-job-id` on each job; `data-iteration-id` on each
// iteration, which holds a `.progress` element whose text is "3 / 10
// splits", "3 splits, total unknown" or "finished".
//
//   http_server.Handle("/", "text/html; charset=utf-8", StatusPageHtml());
#ifndef SLUICE_DISPATCHER_STATUS_PAGE_H_
#define SLUICE_DISPATCHER_STATUS_PAGE_H_

#include <string_view>

namespace sluice::dispatcher {

// The status page, a complete HTML document (UTF-8). Static storage: the
// view stays valid for the life of the program.
std::string_view StatusPageHtml();

}  // namespace sluice::dispatcher

#endif  // SLUICE_DISPATCHER_STATUS_PAGE_H_
