/// Runs `operation` to its end even when the calling task is cancelled, and returns what it returns (or throws what it
/// throws).
///
/// For the short writes that record why work stopped (a job given back to the queue) or clean up after it (blobs and
/// outputs no one references), which must not be cut short by the cancellation that stopped the work. The operation
/// runs in a task of its own that the caller waits for, so nothing outlives the call; it must be bounded (a catalog
/// write, a delete), since cancelling the caller does not end it.
package func whileIgnoringCancellation<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws
    -> T
{
    try await Task { try await operation() }.value
}

/// Runs `operation` to its end even when the calling task is cancelled, and returns what it returns; see the
/// throwing variant.
package func whileIgnoringCancellation<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async -> T {
    await Task { await operation() }.value
}
