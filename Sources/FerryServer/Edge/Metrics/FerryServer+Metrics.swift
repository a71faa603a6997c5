import FerryStorage
import Hummingbird
import ServiceLifecycle

extension FerryServer {
    /// `GET /metrics` of this server: its registry, brought up to date from the catalog at each scrape.
    var metricsEndpoint: MetricsEndpoint {
        MetricsEndpoint(metrics: metrics, token: configuration.metricsToken) {
            [metrics, catalog = mediaCatalog, objects = store, now = configuration.now, runningJobs, status = statusProbe] in
            metrics.recordNode(runningJobs: runningJobs.count)
            // A catalog that does not answer (a PostgreSQL pool waiting for a connection) leaves the scrape prompt.
            async let nodes = status.freshNodeCount()
            let answer = await withTimeLimit(.seconds(2)) { () -> (jobs: JobBacklog, webhooks: WebhookBacklog, uploads: Int)? in
                guard let jobs = try? await catalog.backlog(now: now()), let webhooks = try? await catalog.webhookBacklog(),
                    let uploads = try? await objects.uploadCount()
                else { return nil }
                return (jobs, webhooks, uploads)
            }
            metrics.recordCatalog(answer ?? nil, now: now())
            metrics.recordStatus(
                nodesSeen: await nodes,
                dataDirectoryFreeBytes: status.dataDirectory.flatMap(ServiceStatusProbe.diskFree(at:))?.freeBytes)
        }
    }

    /// The listener of ``FerryServerConfiguration/metricsPort``: `GET /metrics` and nothing else (404), on the
    /// server's host. It runs with the background services, so a worker node serves its series there too.
    func makeMetricsApplication(port: Int) -> some Service {
        let router = Router()
        let series = metricsEndpoint
        router.get("/metrics") { request, _ in await series.respond(to: request) }
        var logger = configuration.logger
        if logger.logLevel > .debug { logger.logLevel = .warning }
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: port), serverName: "Ferry"),
            logger: logger)
    }
}
