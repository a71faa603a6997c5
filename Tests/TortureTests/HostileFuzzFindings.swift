import FerryTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the fuzz saw: answers by route group, refusals by the HTTP layer, crashes and answers out of their dialect,
/// each class reported once with its first example and how often it came.
struct FuzzFindings {
    let seed: UInt64
    var sent = 0
    var statuses: [FuzzGroup: [String: Int]] = [:]
    var refusedByHTTPLayer: [String: Int] = [:]
    var crashes: [String: Example] = [:]
    var crashOrder: [String] = []
    var violations: [String: Example] = [:]
    var violationOrder: [String] = []
    var health: [String] = []
    /// Probes not sent, by kind, because their kind had crashed the server twice in the cell.
    var skipped: [String: Int] = [:]

    struct Example {
        var id: String
        var text: String
        var count: Int
        /// For crashes: the operations and credentials of the requests that preceded one.
        var operations: Set<String> = []
        var credentials: Set<String> = []
    }

    init(seed: UInt64) { self.seed = seed }

    mutating func count(_ request: FuzzRequest, _ outcome: RawHTTPExchange.Outcome) {
        sent += 1
        let group = FuzzGroup.routed(request.path)
        let bucket: String =
            switch outcome {
            case .answered(let response) where Self.isHTTPLayerRefusal(response, request): "refused"
            case .answered(let response) where response.status == 501: "501"
            case .answered(let response): "\(response.status / 100)xx"
            case .closedWithoutAnswer: "closed"
            case .timedOut: "timed out"
            case .notConnected: "not connected"
            case .abandoned: "server died"
            }
        statuses[group, default: [:]][bucket, default: 0] += 1
    }

    /// The HTTP layer's own refusal of a head it cannot read (no route group saw it, so no envelope): a 400, or a 431
    /// for a head over its limits, with a line of plain text saying why, that closes the connection; or a bare 400
    /// (not a HEAD request's answer). The line follows a HEAD request's refusal too: the server never had the head,
    /// so it does not know the method.
    static func isHTTPLayerRefusal(_ response: RawHTTPExchange.Response, _ request: FuzzRequest) -> Bool {
        guard [400, 431].contains(response.status), response.header("connection")?.lowercased() == "close" else {
            return false
        }
        if request.method == "HEAD" { return response.header("content-type") == "text/plain; charset=utf-8" }
        if response.status == 400 && response.body.isEmpty && response.header("content-type") == nil { return true }
        let text = response.text
        return response.header("content-type") == "text/plain; charset=utf-8"
            && (text.hasPrefix("Bad request: the request line or headers could not be parsed (")
                || response.status == 431 && text.hasPrefix("Request header fields too large: "))
    }

    /// A crash class: the route group of the request that preceded it and what crashed.
    static func crashKey(_ report: CrashReport, after request: FuzzRequest?) -> String {
        guard let request else { return "between requests: " + report.what }
        return "\(FuzzGroup.routed(request.path).rawValue): \(report.what)"
    }

    func knows(_ report: CrashReport, after request: FuzzRequest) -> Bool {
        crashes[Self.crashKey(report, after: request)] != nil
    }

    mutating func crashed(_ report: CrashReport, request: FuzzRequest?, cell: FuzzCell, id: String) {
        let key = Self.crashKey(report, after: request)
        let operation = request?.operation ?? "between requests"
        if crashes[key] != nil {
            crashes[key]?.count += 1
            crashes[key]?.operations.insert(operation)
            crashes[key]?.credentials.insert(cell.credential.rawValue)
            print("HostileFuzzTests: ferry serve crashed again (\(key)) at \(id): \(request?.brief ?? "")")
            return
        }
        let text = """
            ferry serve crashed (seed \(seed), \(id); FERRY_TORTURE_SEED=\(seed) repeats it)
              request that preceded the death:
                \(request?.summary ?? "none: it died between requests")
              \(report.description.replacingOccurrences(of: "\n", with: "\n  "))
              log tail:
            \(report.tail)
            """
        crashes[key] = Example(
            id: id, text: text, count: 1, operations: [operation], credentials: [cell.credential.rawValue])
        crashOrder.append(key)
        print("HostileFuzzTests: " + text)
        Issue.record(Comment(rawValue: text))
    }

    mutating func unhealthy(_ problem: String, after cell: FuzzCell) {
        let text = "after \(cell) (seed \(seed)): \(problem)"
        health.append(text)
        Issue.record(Comment(rawValue: "ferry serve is not healthy " + text))
    }

    mutating func judge(_ outcome: RawHTTPExchange.Outcome, request: FuzzRequest, id: String) {
        let group = FuzzGroup.routed(request.path)
        switch outcome {
        case .answered(let response):
            if Self.isHTTPLayerRefusal(response, request) {
                if request.mayBeRefusedByHTTPLayer {
                    refusedByHTTPLayer[request.refusableBecause ?? "?", default: 0] += 1
                } else {
                    violate(
                        group, "the HTTP layer's refusal for a request it should accept", response, request, id)
                }
                return
            }
            if let problem = Self.problem(response, group: group, request: request) {
                violate(group, problem, response, request, id)
            }
        case .closedWithoutAnswer(let received, let error):
            if request.mayBeRefusedByHTTPLayer, received.isEmpty {
                refusedByHTTPLayer[request.refusableBecause ?? "?", default: 0] += 1
            } else {
                let what = received.isEmpty ? "nothing" : "\(received.count) bytes of an incomplete answer"
                violate(
                    group,
                    "the connection closed after \(what) (\(error.map { String(cString: strerror($0)) } ?? "EOF"))",
                    nil, request, id)
            }
        case .timedOut(let received):
            violate(group, "no complete answer within 30 s (\(received.count) bytes)", nil, request, id)
        case .notConnected(let error):
            violate(group, "could not connect (\(String(cString: strerror(error))))", nil, request, id)
        case .abandoned:
            break
        }
    }

    /// What is wrong with an answer for its route group, nil when nothing is: a 5xx (but S3's 501 NotImplemented), a
    /// 4xx outside the group's error envelope, or a HEAD answer with a body.
    static func problem(_ response: RawHTTPExchange.Response, group: FuzzGroup, request: FuzzRequest) -> String? {
        let status = response.status
        let isHead = request.method == "HEAD"
        if status == 0 { return "an answer that is not HTTP" }
        if isHead, response.trailingBytes > 0 || !response.body.isEmpty { return "a HEAD answer with a body" }
        let s3Code = Self.s3Code(response)
        if (500...599).contains(status) {
            if status == 501, group == .objectAPI, isHead || s3Code == "NotImplemented" { return nil }
            return "status \(status)"
        }
        let isError = (400...499).contains(status) || (group == .formUpload && status >= 600)
        guard isError, !isHead else { return nil }
        let contentType = response.header("content-type")?.lowercased() ?? ""
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        func nonEmpty(_ value: Any?) -> Bool { (value as? String).map { !$0.isEmpty } ?? false }
        switch group {
        case .objectAPI, .playback:
            guard contentType.contains("xml") else {
                return "a \(status) that is not XML (Content-Type \(contentType))"
            }
            guard response.text.contains("<Error>"), s3Code.map({ !$0.isEmpty }) == true else {
                return "a \(status) that is not an S3 <Error><Code> document"
            }
        case .mediaAPI, .publish, .consoleSession, .consoleAPI:
            guard contentType.hasPrefix("application/json"), let object else {
                return "a \(status) that is not a JSON object"
            }
            guard nonEmpty(object["code"]), object["message"] is String, nonEmpty(object["requestId"]) else {
                return "a \(status) JSON without code, message and requestId"
            }
        case .uppySigning:
            guard contentType.hasPrefix("application/json"), let object else {
                return "a \(status) that is not a JSON object"
            }
            guard let error = object["error"] as? [String: Any], nonEmpty(error["code"]), error["message"] is String,
                object["message"] is String
            else { return "a \(status) JSON without error.code, error.message and message" }
        case .formUpload:
            guard contentType.hasPrefix("application/json"), let object else {
                return "a \(status) that is not a JSON object"
            }
            guard object["error"] is String, nonEmpty(object["code"]), nonEmpty(object["requestId"]) else {
                return "a \(status) JSON without error, code and requestId"
            }
        case .consoleSite:
            // The console's static files answer in plain text: 404 with a sentence, 405 empty with Allow.
            if status == 404, contentType.hasPrefix("text/plain"), !response.body.isEmpty { return nil }
            if status == 405, response.body.isEmpty, response.header("allow") != nil { return nil }
            return "a console page answer \(status) (Content-Type \(contentType))"
        case .health:
            return "the health endpoint answered \(status)"
        }
        return nil
    }

    /// The status (and error code) of an outcome, in a few words.
    static func brief(_ outcome: RawHTTPExchange.Outcome) -> String {
        switch outcome {
        case .answered(let response):
            let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
            let code =
                s3Code(response) ?? (object?["code"] as? String)
                ?? ((object?["error"] as? [String: Any])?["code"] as? String)
            return "\(response.status)" + (code.map { " " + $0 } ?? "")
        case .closedWithoutAnswer(let received, let error):
            return "closed (\(received.count) bytes, errno \(error ?? 0))"
        case .timedOut: return "timed out"
        case .notConnected(let error): return "not connected (errno \(error))"
        case .abandoned: return "server died"
        }
    }

    static func s3Code(_ response: RawHTTPExchange.Response) -> String? {
        let text = response.text
        guard let start = text.range(of: "<Code>"), let end = text.range(of: "</Code>"),
            start.upperBound <= end.lowerBound
        else { return nil }
        return String(text[start.upperBound..<end.lowerBound])
    }

    mutating func violate(
        _ group: FuzzGroup, _ problem: String, _ response: RawHTTPExchange.Response?, _ request: FuzzRequest,
        _ id: String
    ) {
        let key = "\(group.rawValue): " + problem.replacing(/\d+ bytes/, with: "N bytes")
        if violations[key] != nil {
            violations[key]?.count += 1
            return
        }
        var answer = "no answer"
        if let response {
            answer =
                "\(response.status), Content-Type \(response.header("content-type") ?? "none"), \(response.body.count) bytes: "
                + FuzzRequest.printable(response.text, limit: 300)
        }
        let text = """
            \(key) (seed \(seed), \(id); FERRY_TORTURE_SEED=\(seed) repeats it)
              request:
                \(request.summary)
              answer: \(answer)
            """
        violations[key] = Example(id: id, text: text, count: 1)
        violationOrder.append(key)
        print("HostileFuzzTests: " + text)
        Issue.record(Comment(rawValue: text))
    }

    func summary(elapsed: Duration, restarts: Int) -> String {
        var text =
            "HostileFuzzTests seed \(seed): \(sent) requests in \(elapsed.components.seconds) s, \(restarts) restarts"
        text += "\n  answers by the route group the server routed them to:"
        for group in FuzzGroup.allCases {
            guard let counts = statuses[group] else { continue }
            text +=
                "\n    \(group.rawValue): "
                + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        if !refusedByHTTPLayer.isEmpty {
            text += "\n  refused by the HTTP layer (closed, or its 400/431), by what in the request it may refuse:"
            for (label, count) in refusedByHTTPLayer.sorted(by: { $0.value > $1.value }) {
                text += "\n    \(count)× \(label)"
            }
        }
        text += "\n  crash classes: \(crashes.count)"
        for key in crashOrder {
            guard let crash = crashes[key] else { continue }
            text += "\n    \(crash.count)× \(key) (first: \(crash.id))"
            text += "\n      after: " + crash.operations.sorted().joined(separator: ", ")
            text += "\n      with: " + crash.credentials.sorted().joined(separator: ", ")
        }
        text += "\n  answers outside their envelope, 5xx, silences: \(violations.count) classes"
        for key in violationOrder {
            text += "\n    \(violations[key]?.count ?? 0)× \(key) (first: \(violations[key]?.id ?? ""))"
        }
        for problem in health { text += "\n  unhealthy \(problem)" }
        if !skipped.isEmpty {
            text +=
                "\n  probes not sent after their kind crashed the server twice in a cell: "
                + skipped.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        }
        return text
    }

    /// One issue for the whole run when anything went wrong, with every class and its count (each class was also
    /// recorded in full when first seen).
    func recordIssues() {
        guard !crashes.isEmpty || !violations.isEmpty || !health.isEmpty else { return }
        var text =
            "seed \(seed): \(crashes.count) crash classes, \(violations.count) classes of answers out of their envelope"
        for key in crashOrder { text += "\n  crash ×\(crashes[key]?.count ?? 0): \(key)" }
        for key in violationOrder { text += "\n  ×\(violations[key]?.count ?? 0): \(key)" }
        Issue.record(Comment(rawValue: text))
    }
}
