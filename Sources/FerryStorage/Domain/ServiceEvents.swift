import Foundation
import Tracing

/// What happened to a multipart upload.
package enum MultipartUploadEvent: String, Sendable, CaseIterable {
    /// Created.
    case started
    /// Completed into an object.
    case completed
    /// Aborted by its client.
    case aborted
    /// Aborted by the service: left unfinished past the server's age or a lifecycle rule's.
    case expired
    /// Its parts were listed, as a client does when it picks an upload up again.
    case resumed
}

/// Events the service's layers report as they happen, to whoever counts them (``FerryMetrics`` does). Every
/// method has a default that does nothing, so a layer reports only what it sees.
package protocol ServiceEvents: Sendable {
    /// A multipart upload changed.
    func multipartUpload(_ event: MultipartUploadEvent, count: Int)
    /// A part was uploaded again under a number that had one (a client's retry).
    func partReplaced()
    /// A media job's attempt ended: `outcome` is `done`, `retry`, `failed` (given up) or `released` (handed back at
    /// shutdown).
    func mediaJobEnded(kind: String, outcome: String, duration: Duration)
    /// A video became `Normal` this long after its file was stored.
    func videoBecameNormal(after seconds: TimeInterval)
    /// A webhook delivery attempt ended: `delivered`, `retry` or `failed` (given up), `lag` after the event was made.
    func webhookDeliveryEnded(_ outcome: String, lag: TimeInterval)
    /// A call to the catalog or the blob storage (`layer`) took `duration`; `failed` when it failed (a refusal the
    /// layer made on purpose, such as a quota, is no failure: see ``FerryDomainError/isStoreFailure(_:)``).
    func storageCall(layer: String, operation: String, duration: Duration, failed: Bool)
    /// A call to the catalog or the blob storage whose duration is the client's (writing a request body) failed.
    func storageCallFailed(layer: String, operation: String)
}

extension ServiceEvents {
    package func multipartUpload(_ event: MultipartUploadEvent, count: Int) {}
    package func partReplaced() {}
    package func mediaJobEnded(kind: String, outcome: String, duration: Duration) {}
    package func videoBecameNormal(after seconds: TimeInterval) {}
    package func webhookDeliveryEnded(_ outcome: String, lag: TimeInterval) {}
    package func storageCall(layer: String, operation: String, duration: Duration, failed: Bool) {}
    package func storageCallFailed(layer: String, operation: String) {}
}

extension Optional where Wrapped == any ServiceEvents {
    /// Runs `body` in a span named `layer.operation`, reporting its duration (and whether it failed) as a call to
    /// `layer`'s `operation`.
    package func timed<T>(_ layer: String, _ operation: String, _ body: () async throws -> T) async throws -> T {
        try await withSpan(layer + "." + operation) { _ in
            guard let events = self else { return try await body() }
            let start = ContinuousClock.now
            do {
                let value = try await body()
                events.storageCall(layer: layer, operation: operation, duration: ContinuousClock.now - start, failed: false)
                return value
            } catch {
                events.storageCall(
                    layer: layer, operation: operation, duration: ContinuousClock.now - start,
                    failed: FerryDomainError.isStoreFailure(error))
                throw error
            }
        }
    }

    /// Reports a failed call to `layer`'s `operation` when `error` is the layer's failure.
    package func failed(_ layer: String, _ operation: String, _ error: any Error) {
        guard let events = self, FerryDomainError.isStoreFailure(error) else { return }
        events.storageCallFailed(layer: layer, operation: operation)
    }
}
