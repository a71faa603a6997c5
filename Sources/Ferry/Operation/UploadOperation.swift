/// The one shape of a running upload in Ferry: its events as an `AsyncStream` that finishes when the operation ends,
/// its outcome, and cancel. ``ResumableUploadTask``, ``PublishTask`` and ``FormUpload`` are operations;
/// ``ResumableUploadTask`` can also pause and resume (``PausableUploadOperation``).
///
/// Code that shows progress can be written once for all of them:
///
/// ```swift
/// func follow<Operation: UploadOperation>(_ operation: Operation) async throws -> Operation.Output {
///     operation.events.deliverOnMainActor { event in statusLabel.text = "\(event)" }
///     return try await operation.result
/// }
/// ```
///
/// The operation runs whether or not anyone reads its events or awaits its result. Failures are ``FerryError``s (a
/// publish's result never throws, as in the seed SDK: it carries the ``FerryError`` in ``PublishResult/error``, with
/// the seed's `retCode` in ``PublishResult/retCode``).
public protocol UploadOperation: Sendable {
    /// What the operation reports while it runs.
    associatedtype Event: Sendable
    /// What the operation gives when it succeeds.
    associatedtype Output: Sendable

    /// What happens, in order; the sequence finishes when the operation ends.
    var events: AsyncStream<Event> { get }

    /// The outcome, once the operation ends.
    ///
    /// - Throws: ``FerryError`` when it fails or is cancelled; `CancellationError` when the task awaiting it is
    ///   cancelled (what happens to the operation then is the conforming type's to say).
    var result: Output { get async throws }

    /// Stops the operation at once; its result then reports the cancellation.
    func cancel() async
}

/// An operation that can stop without losing what it sent, and go on later.
public protocol PausableUploadOperation: UploadOperation {
    /// Stops sending at once; what was sent stays, and ``resume()`` continues from there.
    func pause() async

    /// Continues a paused operation.
    func resume() async
}

extension ResumableUploadTask: PausableUploadOperation {}
extension PublishTask: UploadOperation {}
extension FormUpload: UploadOperation {}

extension AsyncStream where Element: Sendable {
    /// Calls `handler` on the main actor with each element, in order, until the stream finishes — the way to update
    /// UIKit or SwiftUI state from upload events.
    ///
    /// ```swift
    /// upload.events.deliverOnMainActor { event in
    ///     if case .progress(let progress) = event { self.fraction = progress.fraction }
    /// }
    /// ```
    ///
    /// - Parameter handler: called on the main actor, once per element, never after the stream finished.
    /// - Returns: the task that delivers; cancel it to stop listening (the stream itself keeps going).
    @discardableResult
    public func deliverOnMainActor(_ handler: @escaping @MainActor @Sendable (Element) -> Void) -> Task<Void, Never> {
        Task { @MainActor in
            for await element in self {
                handler(element)
            }
        }
    }
}
