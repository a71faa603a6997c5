import FerryCore
import Hummingbird

/// One of the edge's wire dialects: how its refusals are written.
///
/// Every route group has one. Its ``ErrorEnvelopeMiddleware`` turns whatever the group's middleware and routes throw
/// into the dialect's error, an `HTTPResponseError` that renders itself: a ``FerryDomainError`` through the
/// dialect's one mapping, the dialect's own refusals as they are, anything else as an internal error whose details are
/// logged and never sent.
protocol Dialect: Sendable {
    /// The dialect's name in log records (`s3`, `media`).
    var name: String { get }
    /// The dialect's error for `error`; nil when it is none of Ferry's refusals (an internal error).
    func wireError(for error: any Error, request: Request, context: FerryRequestContext) -> (any HTTPResponseError)?
    /// The answer to an internal error.
    func internalError(request: Request, context: FerryRequestContext) -> any HTTPResponseError
}

/// Names a route group in the request's observation (its metrics and span) before any of the group's middleware can
/// answer: a preflight the cross-origin policy answers, in front of the group's error envelope, counts in its group.
struct RouteGroupMiddleware: RouterMiddleware {
    typealias Context = FerryRequestContext
    let name: String

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        context.observation.group = name
        return try await next(request, context)
    }
}

/// Renders what a route group throws in the group's dialect (see ``Dialect``); the outermost middleware of a group
/// but for its name (``RouteGroupMiddleware``) and cross-origin headers, which error answers carry too.
struct ErrorEnvelopeMiddleware<D: Dialect>: RouterMiddleware {
    typealias Context = FerryRequestContext
    let dialect: D

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let thrown {
            // A full disk or database is a condition clients and operators should hear of by name.
            let classified = FerryDomainError(machineFailure: thrown)
            if let classified {
                context.logger.error(
                    classified.code == .storageFull ? "storage full" : "catalog locked",
                    metadata: ["ferry.api": .string(dialect.name), "error": .string("\(thrown)")])
            }
            let error = classified ?? thrown
            if Self.isChecksumMismatch(error) { context.observation.checksumMismatch = true }
            if let domain = error as? FerryDomainError {
                if domain.isKeyRateRefusal { context.observation.throttled = true }
                if domain.code == .quotaExceeded { context.observation.quotaRefused = domain.details["QuotaName"] }
            }
            if let wire = dialect.wireError(for: error, request: request, context: context) {
                return try wire.response(from: request, context: context)
            }
            if error is CancellationError {
                context.logger.debug("request cancelled", metadata: ["ferry.api": .string(dialect.name)])
            } else {
                context.logger.error(
                    "internal error", metadata: ["ferry.api": .string(dialect.name), "error": .string("\(error)")])
            }
            return try dialect.internalError(request: request, context: context).response(from: request, context: context)
        }
    }

    /// Whether `error` refuses bytes that did not match a declared checksum or digest, in any dialect.
    static func isChecksumMismatch(_ error: any Error) -> Bool {
        if let error = error as? FerryDomainError { return error.code == .checksumMismatch }
        if let error = error as? S3Error { return error.code == .badDigest || error.code == .xAmzContentSHA256Mismatch }
        if let error = error as? FormUploadError { return error.code == .crc32Mismatch }
        if let error = error as? ResumableRefusal { return error.status == .checksumMismatch }
        return false
    }
}
