import FerryCore
import FerryTransport
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Routes a background session's callbacks to the requests awaiting each task, and settles the tasks no one awaits:
/// those an earlier process started, whose events come after the system relaunched the app.
///
/// Every task completion deletes the task's spool file and its running entry in the ledger; the answer of a task no
/// one awaits is kept in the ledger (when it is a 2xx with a small body) for the request that asks for it again.
///
/// `@unchecked Sendable`: `flights` is only touched while holding `lock` (the ledger, which has a lock of its own, is
/// called while holding it, never the other way round); URLSession calls the delegate on its own serial queue.
final class BackgroundSessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// How a task ended, for the requests awaiting it.
    typealias Continuation = CheckedContinuation<(HTTPURLResponse, Data), any Error>

    /// A request awaiting a task.
    private struct Waiter {
        var progress: @Sendable (Int) -> Void
        var continuation: Continuation
        /// The task's body bytes reported to this request so far.
        var reported: Int64
    }

    /// A task the delegate knows.
    private struct Flight {
        let key: String
        let task: URLSessionTask
        var spoolFile: String?
        var waiters: [Waiter] = []
        var data = Data()
        /// The answer's body grew past what is kept for an answer no one awaits, and was dropped.
        var truncated = false
        var sent: Int64 = 0
    }

    private let lock = NSLock()
    private var flights: [Int: Flight] = [:]
    private var started = 0
    private let ledger: BackgroundTaskLedger
    private let maximumKeptBodySize: Int

    #if canImport(Darwin)
    /// The completion handler of the system's last wake for this session's events.
    let backgroundEvents = BackgroundEventsCompletion()
    #endif

    init(ledger: BackgroundTaskLedger, maximumKeptBodySize: Int) {
        self.ledger = ledger
        self.maximumKeptBodySize = maximumKeptBodySize
    }

    /// Registers a task this process starts for `key`, uploading from `spoolFile`, and the request awaiting it.
    func start(
        _ task: URLSessionTask, key: String, spoolFile: String, progress: @escaping @Sendable (Int) -> Void,
        continuation: Continuation
    ) {
        lock.withLock {
            var flight = Flight(key: key, task: task, spoolFile: spoolFile)
            flight.waiters.append(Waiter(progress: progress, continuation: continuation, reported: 0))
            flights[task.taskIdentifier] = flight
            started += 1
        }
    }

    /// How many tasks this process started.
    var startedTaskCount: Int { lock.withLock { started } }

    /// A running task for `key`, if the delegate knows one.
    func task(forKey key: String) -> URLSessionTask? {
        lock.withLock { flights.values.first { $0.key == key }?.task }
    }

    /// Makes a request await `task`, which may have started in an earlier process: it is told at once of the body
    /// bytes the task has sent so far, then of the rest as they go. False when the task completed meanwhile (its answer
    /// is then in the ledger, if it was one to keep).
    func join(_ task: URLSessionTask, progress: @escaping @Sendable (Int) -> Void, continuation: Continuation) -> Bool {
        let sent: Int64? = lock.withLock {
            guard var flight = flights[task.taskIdentifier] else { return nil }
            flight.waiters.append(Waiter(progress: progress, continuation: continuation, reported: flight.sent))
            flights[task.taskIdentifier] = flight
            return flight.sent
        }
        guard let sent else { return false }
        if sent > 0 { progress(Int(sent)) }
        return true
    }

    /// Makes the tasks a session still runs from an earlier process known (with the spool files the ledger names for
    /// them), resumes any that process created but never started, and returns the keys of all running tasks.
    func learn(_ tasks: [URLSessionTask]) -> Set<String> {
        let (keys, suspended): (Set<String>, [URLSessionTask]) = lock.withLock {
            var suspended: [URLSessionTask] = []
            for task in tasks where task.state == .running || task.state == .suspended {
                guard let flight = flight(for: task) else { continue }
                flights[task.taskIdentifier] = flight
                if task.state == .suspended { suspended.append(task) }
            }
            return (Set(flights.values.map(\.key)), suspended)
        }
        for task in suspended { task.resume() }
        return keys
    }

    /// The flight of `task`: the known one, or a new one for a task from an earlier process (nil for a task without a
    /// key, which is not this transport's). Called while holding `lock`.
    private func flight(for task: URLSessionTask) -> Flight? {
        if let flight = flights[task.taskIdentifier] { return flight }
        guard let key = task.taskDescription else { return nil }
        return Flight(
            key: key, task: task, spoolFile: ledger.spoolFile(forRunning: key), sent: max(0, task.countOfBytesSent))
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        let reports: [(@Sendable (Int) -> Void, Int)] = lock.withLock {
            guard var flight = flight(for: task) else { return [] }
            flight.sent = totalBytesSent
            var reports: [(@Sendable (Int) -> Void, Int)] = []
            for index in flight.waiters.indices {
                let delta = totalBytesSent - flight.waiters[index].reported
                guard delta > 0 else { continue }
                flight.waiters[index].reported = totalBytesSent
                reports.append((flight.waiters[index].progress, Int(delta)))
            }
            flights[task.taskIdentifier] = flight
            return reports
        }
        for (progress, delta) in reports { progress(delta) }
    }

    /// No redirect is followed, as in ``URLSessionTransport``: the 3xx is the answer.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) { completionHandler(nil) }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock {
            guard var flight = flight(for: dataTask) else { return }
            if flight.waiters.isEmpty && flight.data.count + data.count > maximumKeptBodySize {
                flight.truncated = true
                flight.data = Data()
            } else if !flight.truncated {
                flight.data.append(data)
            }
            flights[dataTask.taskIdentifier] = flight
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let outcome = Self.outcome(of: task, error: error)
        // The spool file and the ledger are settled before anyone is told, while holding the lock, so that a request
        // for the same key either joins this task or finds its answer in the ledger.
        let flight: Flight? = lock.withLock {
            guard let flight = self.flight(for: task) else { return nil }
            flights[task.taskIdentifier] = nil
            var answer: BackgroundTaskLedger.Answer?
            if flight.waiters.isEmpty, !flight.truncated, case .success(let response) = outcome,
                (200..<300).contains(response.statusCode)
            {
                answer = BackgroundTaskLedger.Answer(
                    status: response.statusCode,
                    headers: Self.headers(of: response).map {
                        BackgroundTaskLedger.Header(name: $0.name, value: $0.value)
                    },
                    body: flight.data)
            }
            if let file = ledger.finish(key: flight.key, spoolFile: flight.spoolFile, answer: answer) {
                ledger.removeFile(file)
            }
            return flight
        }
        guard let flight else { return }
        for waiter in flight.waiters {
            if flight.truncated {
                waiter.continuation.resume(
                    throwing: TransportError("The answer to an upload started earlier was too large to keep."))
            } else {
                waiter.continuation.resume(with: outcome.map { ($0, flight.data) })
            }
        }
    }

    #if canImport(Darwin)
    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        let events = backgroundEvents
        DispatchQueue.main.async { MainActor.assumeIsolated { events.finish() } }
    }
    #endif

    /// How `task` ended: its HTTP response, or the error a transport reports (cancellation as `CancellationError`,
    /// a timeout as a ``TransportError`` that says so), as `URLSessionTransport` does.
    private static func outcome(of task: URLSessionTask, error: (any Error)?) -> Result<HTTPURLResponse, any Error> {
        if let error {
            let nsError = error as NSError
            if nsError.code == NSURLErrorCancelled { return .failure(CancellationError()) }
            return .failure(
                TransportError(
                    isTimeout: nsError.code == NSURLErrorTimedOut,
                    "HTTP request failed: \(nsError.localizedDescription)"))
        }
        guard let response = task.response as? HTTPURLResponse else {
            return .failure(TransportError("The server's answer was not HTTP."))
        }
        return .success(response)
    }

    /// A response's headers as name-value pairs.
    static func headers(of response: HTTPURLResponse) -> [(name: String, value: String)] {
        response.allHeaderFields.map { (String(describing: $0.key), String(describing: $0.value)) }
    }
}

#if canImport(Darwin)
/// The completion handler the system hands the app with a background session's events, held on the main actor until
/// the session has delivered them all, then called there.
@MainActor
final class BackgroundEventsCompletion {
    private var handler: (() -> Void)?

    nonisolated init() {}

    /// Keeps `handler` until the session's events are delivered.
    func hold(_ handler: @escaping () -> Void) {
        self.handler = handler
    }

    /// Calls the handler held, if any, once.
    func finish() {
        let handler = self.handler
        self.handler = nil
        handler?()
    }
}
#endif
