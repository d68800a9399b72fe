// The tab interface's defaults (see workbench_view.h); this file also lets AUTOMOC find the
// header's Q_OBJECT.
#include "views/workbench_view.h"

namespace app {

QString WorkbenchView::dataCsv() { return {}; }

}  // namespace app
