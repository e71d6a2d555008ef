#ifndef RBMREC_SERVER_SERVICE_SERVICE_METRICS_H_
#define RBMREC_SERVER_SERVICE_SERVICE_METRICS_H_

// The service's gauges for the metrics registry (server/metrics/metrics.h):
// store counts, serving and training state, the active and last full model.
// Lives with the service so that server/metrics/ does not depend on it.

#include "server/metrics/metrics.h"
#include "server/service/service.h"

namespace rbmrec::server {

// How long the store counts read by the service collector are reused.
inline constexpr double kStatsCacheSeconds = 1.0;

// Adds the service's gauges (top of this file) to `registry`. `service`
// must outlive the registry's last Render(). The collector caches the store
// reads (GetStats, ListModels) for kStatsCacheSeconds, so scrapes cost at
// most one pair of short reads per second on the store's read connection;
// the rest (serving, training slot) is read from memory. Scrapes are
// serialized by the collector's own mutex, which no RPC takes.
void AddServiceCollector(MetricsRegistry* registry, RbmrecService* service);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_SERVICE_METRICS_H_
