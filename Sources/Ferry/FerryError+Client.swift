import FerryCore

extension FerryError {
    /// The error an operation ends with when it is cancelled.
    static func cancelledError() -> FerryError { FerryError(.cancelled, "The upload was cancelled.") }

    /// Runs `body` and reports whatever it throws as a ``FerryError``: a `FerryError` as it is, cancellation of the
    /// calling task as ``Code/cancelled``, anything else as `fallback` with the error underneath. What every client
    /// entry point that `throws(FerryError)` runs its work in.
    static func catching<T>(
        _ fallback: Code, _ what: @autoclosure () -> String, _ body: () async throws -> T
    ) async throws(FerryError) -> T {
        do {
            return try await body()
        } catch {
            throw FerryError(error, fallback: fallback, what())
        }
    }

    /// As the async `catching`, for synchronous work.
    static func catching<T>(_ fallback: Code, _ what: @autoclosure () -> String, _ body: () throws -> T) throws(FerryError)
        -> T
    {
        do {
            return try body()
        } catch {
            throw FerryError(error, fallback: fallback, what())
        }
    }

    /// `error` as a ``FerryError``: itself when it is one, ``Code/cancelled`` for cancellation, else `fallback`
    /// with `what` and the error's own words.
    init(_ error: any Error, fallback: Code, _ what: String) {
        if let error = error as? FerryError {
            self = error
        } else if error is CancellationError {
            self = FerryError(.cancelled, "\(what) was cancelled.")
        } else {
            self = FerryError(fallback, "\(what) failed: \(error)", underlying: error)
        }
    }
}
