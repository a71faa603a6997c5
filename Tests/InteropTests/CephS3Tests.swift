import FerryTestSupport
import Foundation
import Testing

/// Ceph's s3-tests, the conformance suite Ceph RGW, MinIO, SeaweedFS and Garage measure themselves with, run unmodified
/// against `ferry serve` (Tests/S3Conformance/run_s3tests.py starts it on a free port). Every test listed in
/// Tests/S3Conformance/expected-pass.txt must pass; the run prints any other test that passes, to be added to the list.
@Suite("Ceph s3-tests against ferry serve", .serialized, .timeLimit(.minutes(20)))
struct CephS3Tests {
    /// The Python that has the suite's requirements: `FERRY_S3TESTS_PYTHON`, or the virtualenv `.ci/run` makes.
    static var python: String {
        if let given = ProcessInfo.processInfo.environment["FERRY_S3TESTS_PYTHON"], !given.isEmpty { return given }
        return root + "/.build/s3-tests-venv/bin/python"
    }

    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    @Test("every test in expected-pass.txt passes")
    func conformance() async throws {
        let python = Self.python
        try #require(
            FileManager.default.isExecutableFile(atPath: python),
            "no Python with s3-tests' requirements at \(python): run .ci/run, or set FERRY_S3TESTS_PYTHON")
        let script = Self.root + "/Tests/S3Conformance/run_s3tests.py"
        let ferry = FerryExecutable.path
        let result = try await runBlocking {
            try PeerProcess.run(python, [script, "--ferry", ferry, "--python", python, "--workers", "3"])
        }
        // The summary (and any failure with its reason) is worth seeing in every run.
        print(result.output)
        #expect(result.status == 0, "\(result.output)\n\(result.errorOutput)")
        #expect(result.output.contains(" expected passed"), "\(result.output)")
    }
}
