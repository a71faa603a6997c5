import FerryCore
import FerryTransport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests with `URLSession`; the default transport on Apple platforms, and available on Linux through
/// FoundationNetworking.
///
/// Upload progress comes from the session's `didSendBodyData` callbacks, so it counts bytes as the system sends them.
/// A ``StreamedBody`` is first copied, chunk by chunk, to a temporary file the session uploads from (and which is
/// removed afterwards): memory stays at one chunk, on Apple platforms and in FoundationNetworking alike.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let delegate: SessionDelegate

    /// Creates a transport with its own session (no caching, no cookies).
    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        configuration.httpMaximumConnectionsPerHost = 16
        delegate = SessionDelegate()
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    public func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        guard let url = URL(string: request.url) else {
            throw TransportError("The request URL is not valid.")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method
        let seconds = request.timeout.timeInterval
        urlRequest.timeoutInterval = seconds
        for header in request.headers where header.name.lowercased() != "host" {
            urlRequest.addValue(header.value, forHTTPHeaderField: header.name)
        }
        let task: URLSessionTask
        var bodyFile: URL?
        defer { if let bodyFile { try? FileManager.default.removeItem(at: bodyFile) } }
        if let streamed = request.streamedBody {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-body-\(UUID().uuidString)")
            bodyFile = file
            try await Self.write(streamed, to: file)
            task = session.uploadTask(with: urlRequest, fromFile: file)
        } else if request.bodyLength == 0 && request.method != "PUT" && request.method != "POST" {
            task = session.dataTask(with: urlRequest)
        } else {
            task = session.uploadTask(with: urlRequest, from: request.bodyBuffer?.withUnsafeBytes { Data($0) } ?? Data())
        }
        let (response, data): (HTTPURLResponse, Data) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                delegate.register(task, progress: bodyProgress, continuation: continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
        var headers: [(name: String, value: String)] = []
        for (name, value) in response.allHeaderFields {
            headers.append((String(describing: name), String(describing: value)))
        }
        let status = response.statusCode
        if let responseSink, (200..<300).contains(status) {
            try await responseSink([UInt8](data))
            return TransportResponse(status: status, headers: headers, body: [])
        }
        return TransportResponse(status: status, headers: headers, body: [UInt8](data))
    }

    /// Copies a streamed body to `file`, one chunk at a time.
    private static func write(_ body: StreamedBody, to file: URL) async throws {
        guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600])
        else {
            throw TransportError("A temporary file for the request body cannot be created.")
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        for try await chunk in body.chunks {
            try handle.write(contentsOf: chunk)
        }
    }
}

/// Routes a session's callbacks to the request that owns each task.
///
/// `@unchecked Sendable`: the task table is only touched while holding `lock`; URLSession calls the delegate on its
/// own serial queue.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private struct Entry {
        var progress: @Sendable (Int) -> Void
        var continuation: CheckedContinuation<(HTTPURLResponse, Data), any Error>
        var data = Data()
        var sent: Int64 = 0
    }
    private let lock = NSLock()
    private var entries: [Int: Entry] = [:]

    func register(
        _ task: URLSessionTask, progress: @escaping @Sendable (Int) -> Void,
        continuation: CheckedContinuation<(HTTPURLResponse, Data), any Error>
    ) {
        lock.withLock { entries[task.taskIdentifier] = Entry(progress: progress, continuation: continuation) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        let callback: ((@Sendable (Int) -> Void), Int)? = lock.withLock {
            guard var entry = entries[task.taskIdentifier] else { return nil }
            let delta = totalBytesSent - entry.sent
            entry.sent = totalBytesSent
            entries[task.taskIdentifier] = entry
            return delta > 0 ? (entry.progress, Int(delta)) : nil
        }
        if let (progress, delta) = callback { progress(delta) }
    }

    /// Redirects are not followed: a signed request goes only where it was addressed (its security token with it),
    /// and the 3xx is its answer.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) { completionHandler(nil) }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { entries[dataTask.taskIdentifier]?.data.append(data) }
    }

    /// What kind of transport failure a URL loading error is.
    static func kind(of error: NSError) -> TransportError.Kind {
        switch error.code {
        case NSURLErrorCannotConnectToHost: .connectionRefused
        case NSURLErrorCannotFindHost, NSURLErrorDNSLookupFailed: .hostNotFound
        case NSURLErrorTimedOut: .timeout
        case NSURLErrorSecureConnectionFailed, NSURLErrorServerCertificateUntrusted, NSURLErrorServerCertificateHasBadDate,
            NSURLErrorServerCertificateNotYetValid, NSURLErrorServerCertificateHasUnknownRoot,
            NSURLErrorClientCertificateRejected, NSURLErrorClientCertificateRequired:
            .tls
        case NSURLErrorNetworkConnectionLost: .connectionReset
        default: .other
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = lock.withLock({ entries.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            let nsError = error as NSError
            if nsError.code == NSURLErrorCancelled {
                entry.continuation.resume(throwing: CancellationError())
            } else {
                entry.continuation.resume(
                    throwing: TransportError(
                        Self.kind(of: nsError), url: task.originalRequest?.url?.absoluteString ?? "",
                        detail: nsError.localizedDescription))
            }
            return
        }
        guard let response = task.response as? HTTPURLResponse else {
            entry.continuation.resume(throwing: TransportError("The server's answer was not HTTP."))
            return
        }
        entry.continuation.resume(returning: (response, entry.data))
    }
}
