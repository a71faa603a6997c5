import FerryTestSupport
import Foundation
import Testing

// A seeded fuzz of `ferry serve` with hostile requests: every route group, with every kind of credential, gets
// requests whose Host, header values, query values and JSON, XML or multipart bodies are mutated, signed validly where
// the route checks a signature (so the mutation reaches the handler) and also unsigned or badly signed. Each answer
// must be a well-formed answer in its route group's dialect (a 4xx in the group's error envelope, never a 5xx), and
// the server process must stay alive: a Swift process that crashes keeps its socket open while it prints its
// backtrace, so its log and its process are watched, not only its port.
//
// Each route group with each credential first gets every operation of the group with a Host that is not a valid
// authority, with its XML or JSON body nested as deep as its size limit allows, with a body over that limit, with an
// XML processing instruction without data and with an XML element name that is not UTF-8; then FERRY_FUZZ_REQUESTS
// random requests (default 24). The run prints its seed; FERRY_TORTURE_SEED repeats it (the same requests, in the
// same order).
// FERRY_FUZZ_ONLY keeps the cells whose "group / credential" name contains it (say "object API / device"), and
// FERRY_FUZZ_TRACE=1 prints a line per request.

@Suite(
    "Torture: seeded hostile-request fuzz of every route group with every credential", .serialized,
    .timeLimit(.minutes(20)))
struct HostileFuzzTests {
    @Test(
        "every hostile request is answered in its route group's envelope, never with a 5xx, and ferry serve stays alive"
    )
    func everyRouteGroupWithEveryCredential() async throws {
        let seed = tortureSeed()
        print("HostileFuzzTests seed \(seed) (FERRY_TORTURE_SEED repeats it)")
        let environment = ProcessInfo.processInfo.environment
        let perCell = environment["FERRY_FUZZ_REQUESTS"].flatMap { Int($0) } ?? 24
        let only = environment["FERRY_FUZZ_ONLY"].map { $0.lowercased() }
        let trace = environment["FERRY_FUZZ_TRACE"] == "1"
        let directory = TemporaryDirectory.make("ferry-torture-fuzz")
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let server = try await FuzzedServer.start(directory: directory)
        let fixtures = try await FuzzFixtures.make(server)
        var findings = FuzzFindings(seed: seed)
        let started = ContinuousClock.now
        for (index, cell) in FuzzCell.all.enumerated() {
            if let only, !cell.description.lowercased().contains(only) { continue }
            // Each cell has a generator of its own, so one cell can be repeated alone with FERRY_FUZZ_ONLY.
            var random = SeededGenerator(seed: seed &+ UInt64(index + 1) &* 0x9E37_79B9_7F4A_7C15)
            // First the probes of every operation of the group, cleanly signed; then the seeded random requests.
            let plans = FuzzRequest.probes(cell.group) + Array(repeating: .random, count: perCell)
            var number = 0
            // A kind of probe that crashed the server twice in this cell is not sent again in it (a server this broken
            // would only crash the same way, at a restart's cost each time); its requests are still made, so the
            // random requests after them stay those of the seed.
            var crashesByProbe: [String: Int] = [:]
            for plan in plans {
                guard var request = FuzzRequest.make(cell, fixtures, port: server.port, &random, plan: plan) else {
                    continue
                }
                number += 1
                if plan.kind != "random", crashesByProbe[plan.kind, default: 0] >= 2 {
                    findings.skipped[plan.kind, default: 0] += 1
                    continue
                }
                let id = "\(cell) #\(number)"
                let wire = request.wire()
                let outcome = await RawHTTPExchange.send(
                    port: server.port, wire, timeout: .seconds(30), closeGrace: .milliseconds(500),
                    abandon: { server.isDying() })
                findings.count(request, outcome)
                if trace { print("HostileFuzzTests \(id): \(FuzzFindings.brief(outcome)) ← \(request.brief)") }
                let answered = if case .answered = outcome { true } else { false }
                if !answered {
                    // No answer: give a dying process a moment to show it before judging the silence (a shorter one
                    // where the HTTP layer may have refused the bytes).
                    await server.waitForDeath(
                        within: request.mayBeRefusedByHTTPLayer ? .milliseconds(300) : .seconds(3))
                }
                if server.isDying() {
                    let crash = await server.collectCrash { findings.knows($0, after: request) }
                    findings.crashed(crash, request: request, cell: cell, id: id)
                    crashesByProbe[plan.kind, default: 0] += 1
                    try await server.restart()
                    continue
                }
                findings.judge(outcome, request: request, id: id)
            }
            // After each batch: the process, its log and the health endpoint.
            if let problem = await server.liveness() {
                findings.unhealthy(problem, after: cell)
                if server.isDying() {
                    findings.crashed(await server.collectCrash(), request: nil, cell: cell, id: "after \(cell)")
                }
                try await server.restart()
            }
        }
        let problem = await server.liveness()
        #expect(problem == nil, "ferry serve after the fuzz: \(problem ?? "")")
        print(findings.summary(elapsed: ContinuousClock.now - started, restarts: server.starts - 1))
        findings.recordIssues()
        await server.stop()
    }
}

// MARK: - Route groups and credentials

/// A group of routes that share a way in and an error envelope.
enum FuzzGroup: String, CaseIterable, Sendable {
    case objectAPI = "object API"
    case mediaAPI = "media API"
    case formUpload = "form upload"
    case publish = "publish"
    case playback = "playback"
    case consoleSite = "console site"
    case consoleSession = "console session"
    case consoleAPI = "console API"
    case uppySigning = "Uppy signing"
    case health = "health"

    /// The group the server routes a raw path to (as FerryServer.makeRouter does), which decides the dialect of the
    /// answer whatever group the request was made for: every path under `/_ferry/` that no group takes is the media
    /// API's JSON 404, and S3 takes everything else.
    static func routed(_ rawPath: String) -> FuzzGroup {
        // The router reads a path by its segments, so empty ones (`//`) do not count.
        let path = "/" + rawPath.split(separator: "/").joined(separator: "/")
        func under(_ prefix: String) -> Bool { path == prefix || path.hasPrefix(prefix + "/") }
        if under("/console") { return .consoleSite }
        if path == "/_ferry/console/session" || path == "/_ferry/console/session/" { return .consoleSession }
        if path.hasPrefix("/_ferry/console/api/"), path.dropFirst("/_ferry/console/api/".count).split(separator: "/").count <= 1 {
            return .consoleAPI
        }
        if under("/s3/multipart") { return .uppySigning }
        if under("/_ferry/v1") { return .mediaAPI }
        if under("/_ferry/ugc") { return .publish }
        if under("/_ferry/play") { return .playback }
        if path == "/_ferry/health" || path == "/_ferry/health/" { return .health }
        if path == "/_ferry/form" || path == "/_ferry/form/" { return .formUpload }
        if under("/_ferry") { return .mediaAPI }
        return .objectAPI
    }

    /// The SigV4 service a well-behaved client signs this group's requests for.
    var signingService: String {
        switch self {
        case .mediaAPI, .consoleAPI, .consoleSession, .uppySigning: "ferry"
        default: "s3"
        }
    }
}

/// A kind of credential, presented the way it is meant to be (a SigV4 signature, a publish signature in the JSON body,
/// an upload token in the form, a session cookie), whatever the route expects.
enum FuzzCredential: String, CaseIterable, Sendable {
    case root = "root"
    case scopedKey = "scoped key"
    case sts = "STS"
    case deviceUpload = "device upload credential"
    case publishSignature = "publish signature"
    case formToken = "form token"
    case consoleSession = "console session"
    case anonymous = "no credential"
}

/// One route group with one kind of credential.
struct FuzzCell: Sendable, CustomStringConvertible {
    var group: FuzzGroup
    var credential: FuzzCredential
    var description: String { "\(group.rawValue) / \(credential.rawValue)" }

    static let all: [FuzzCell] = FuzzGroup.allCases.flatMap { group in
        FuzzCredential.allCases.map { FuzzCell(group: group, credential: $0) }
    }
}
