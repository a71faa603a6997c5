import Foundation

/// Runs blocking work (waiting for a process, reading a pipe) on a thread of its own, so the cooperative thread pool
/// (two threads on a two-core machine) keeps serving in-process servers meanwhile.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.start()
    }
}

extension Process {
    /// Waits for the process to exit without blocking the cooperative pool.
    public func exited() async {
        _ = try? await runBlocking { self.waitUntilExit() }
    }
}
