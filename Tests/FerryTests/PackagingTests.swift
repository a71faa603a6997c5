import FerryTestSupport
import Foundation
import Testing

/// What an app links when it depends on the client SDK: on Apple platforms, Foundation and the SDK's own modules; the
/// AsyncHTTPClient transport (and with it SwiftNIO) only on Linux, or when the app adds the `FerryAsyncHTTPClient`
/// product itself.
@Suite("Packaging for apps", .timeLimit(.minutes(10)))
struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The package manifest as `swift package dump-package` reads it (in a scratch directory of its own, so it does
    /// not wait for the build directory this test runs from).
    static func manifest() async throws -> [String: Any] {
        let scratch = TemporaryDirectory.make("ferry-manifest")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", root.path, "--scratch-path", scratch, "dump-package"]
        let run = try await runBlocking { try process.runCapturing() }
        #expect(process.terminationStatus == 0, "\(run.errorOutput)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
    }

    /// A target's dependencies as (kind, name, package, platforms its condition names).
    static func dependencies(of target: String, in manifest: [String: Any]) throws
        -> [(kind: String, name: String, package: String?, platforms: [String]?)]
    {
        let targets = try #require(manifest["targets"] as? [[String: Any]])
        let entry = try #require(targets.first { $0["name"] as? String == target }, "no target \(target)")
        let list = try #require(entry["dependencies"] as? [[String: Any]])
        return list.compactMap { dependency in
            guard let (kind, value) = dependency.first, let fields = value as? [Any] else { return nil }
            let name = fields.first as? String ?? ""
            let package = kind == "product" ? fields.dropFirst().first as? String : nil
            let condition = fields.last as? [String: Any]
            return (kind, name, package, condition?["platformNames"] as? [String])
        }
    }

    @Test("Ferry, FerryTransport and FerryCore need no SwiftNIO or AsyncHTTPClient on Apple platforms; Linux takes the AsyncHTTPClient transport as its default")
    func clientLinksNoNIOOnApplePlatforms() async throws {
        let manifest = try await Self.manifest()
        let nioPackages: Set<String> = ["swift-nio", "async-http-client", "swift-nio-extras", "swift-nio-ssl"]
        for target in ["Ferry", "FerryTransport", "FerryCore"] {
            for dependency in try Self.dependencies(of: target, in: manifest) where dependency.platforms == nil {
                let package = dependency.package ?? ""
                #expect(!nioPackages.contains(package), "\(target) depends on \(dependency.name)")
                #expect(dependency.name != "FerryAsyncHTTPClient", "\(target) always depends on the NIO transport")
            }
        }
        let conditional = try Self.dependencies(of: "Ferry", in: manifest).filter { $0.name == "FerryAsyncHTTPClient" }
        #expect(conditional.count == 1)
        #expect(conditional.first?.platforms == ["linux"])
        let transport = try Self.dependencies(of: "FerryAsyncHTTPClient", in: manifest)
        #expect(transport.contains { $0.package == "async-http-client" })
        let products = try #require(manifest["products"] as? [[String: Any]]).compactMap { $0["name"] as? String }
        #expect(products.contains("FerryAsyncHTTPClient"))
    }

    @Test("no source file of the Apple-platform client imports SwiftNIO or AsyncHTTPClient outside a Linux-only block")
    func clientSourcesImportNoNIO() throws {
        var checked = 0
        for module in ["Ferry", "FerryTransport", "FerryCore"] {
            let directory = Self.root.appendingPathComponent("Sources/\(module)")
            let files = try #require(FileManager.default.enumerator(atPath: directory.path)).compactMap { $0 as? String }
            for file in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                // Conditions of the enclosing #if blocks, innermost last.
                var conditions: [String] = []
                for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    if trimmed.hasPrefix("#if ") {
                        conditions.append(String(trimmed.dropFirst(4)))
                    } else if trimmed.hasPrefix("#else") || trimmed.hasPrefix("#elseif") {
                        if !conditions.isEmpty { conditions[conditions.count - 1] = "else" }
                    } else if trimmed.hasPrefix("#endif") {
                        _ = conditions.popLast()
                    } else if let module = Self.importedModule(trimmed),
                        module.hasPrefix("NIO") || module == "AsyncHTTPClient" || module == "FerryAsyncHTTPClient"
                    {
                        #expect(conditions.last == "os(Linux)", "\(module) imported in \(file) on every platform")
                    }
                }
                checked += 1
            }
        }
        #expect(checked > 40)
    }

    @Test("only the edge imports Hummingbird: FerryStorage and FerryMedia neither depend on it nor import it, nor any layer above their own")
    func serverLayers() async throws {
        let manifest = try await Self.manifest()
        let above = ["FerryStorage": ["FerryMedia", "FerryServer"], "FerryMedia": ["FerryServer"]]
        var checked = 0
        for (module, higher) in above {
            for dependency in try Self.dependencies(of: module, in: manifest) {
                #expect(dependency.package != "hummingbird", "\(module) depends on \(dependency.name)")
                #expect(!higher.contains(dependency.name), "\(module) depends on \(dependency.name)")
            }
            let directory = Self.root.appendingPathComponent("Sources/\(module)")
            let files = try #require(FileManager.default.enumerator(atPath: directory.path)).compactMap { $0 as? String }
            for file in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    guard let name = Self.importedModule(line.trimmingCharacters(in: .whitespaces)) else { continue }
                    let refused = name.hasPrefix("Hummingbird") || higher.contains(name)
                    #expect(!refused, "\(module)/\(file) imports \(name)")
                }
                checked += 1
            }
        }
        #expect(checked > 50)  // the layers hold some sixty files: a path that reads none fails here
        #expect(try Self.dependencies(of: "FerryServer", in: manifest).contains { $0.package == "hummingbird" })
    }

    /// The module an `import` line names, if the line is one.
    static func importedModule(_ line: String) -> String? {
        let words = line.split(separator: " ").map(String.init).filter { !$0.hasPrefix("@") }
        guard words.first == "import", words.count >= 2 else { return nil }
        return words[1].split(separator: ".").first.map(String.init)
    }
}
