import NIOConcurrencyHelpers
import ServiceLifecycle

/// The services of one ``FerryServer`` that have started and not yet ended, by name: what `ferry serve` names when its
/// shutdown overruns its bound.
public final class RunningServices: Sendable {
    private let running = NIOLockedValueBox<[String: Int]>([:])

    /// An empty set.
    public init() {}

    /// The names of the services running now, sorted.
    public var names: [String] { running.withLockedValue { $0.filter { $0.value > 0 }.keys.sorted() } }

    /// `service`, counted as running under `name` from its start to its end.
    public func tracking(_ service: any Service, as name: String) -> any Service {
        TrackedService(name: name, service: service, running: self)
    }

    fileprivate func change(_ name: String, by delta: Int) {
        running.withLockedValue { $0[name, default: 0] += delta }
    }
}

private struct TrackedService: Service {
    let name: String
    let service: any Service
    let running: RunningServices

    func run() async throws {
        running.change(name, by: 1)
        defer { running.change(name, by: -1) }
        try await service.run()
    }
}
