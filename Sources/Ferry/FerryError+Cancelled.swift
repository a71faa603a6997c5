import FerryCore

extension FerryError {
    /// The error an operation ends with when it is cancelled.
    static func cancelledError() -> FerryError { FerryError(.cancelled, "The upload was cancelled.") }
}
