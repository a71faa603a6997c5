import ArgumentParser
import FerryServer
import Foundation
import UnixSignals

/// `ferry console`: the web console of the data directory's service, in this process, until SIGINT or SIGTERM.
struct ConsoleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "Runs the service on the data directory in-process and prints the web console's URL.",
        discussion: """
            Sign in with the data directory's root key (root-credentials.json in it) or any access key made with \
            `ferry keys create`. When `ferry serve` already runs on the directory, prints that server's console URL \
            instead.
            """)

    @Option(name: .customLong("data-dir"), help: "Data directory (or FERRY_DATA_DIR). Default ~/.ferry.")
    var dataDirectory: String?

    @Option(help: "Loopback port to listen on; 0 picks a free one. Default 0.")
    var port: Int = 0

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535.") }
    }

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        let directory = dataDirectory ?? env["FERRY_DATA_DIR"] ?? defaultDataDirectory(env)
        let service: EmbeddedService
        do {
            service = try await EmbeddedService.start(
                dataDirectory: directory, region: defaultRegion(env), port: port, followRequests: true,
                shutdownSignals: [.sigterm, .sigint])
        } catch let busy as DataDirectoryInUse {
            guard let endpoint = busy.endpoint else { throw dataDirectoryBusy(busy) }
            say("ferry serve runs on \(directory): its console is \(endpoint)/console/")
            return
        }
        // This process serves the console: without its files it says so, rather than print a URL that answers 503.
        guard FerryServer.consoleInstalled else {
            await service.stop()
            complain(
                "ferry: the console's files are not installed: put the Ferry_FerryServer.resources directory of this "
                    + "build beside the ferry binary, or set FERRY_CONSOLE_DIR to its Site directory.")
            throw ExitCode(ExitCodes.failed)
        }
        say("Ferry console: \(service.endpoint.absoluteString)/console/ (data: \(directory))")
        say("Sign in with the access key in \(directory)/root-credentials.json, or one made with `ferry keys create`.")
        try await service.wait()
    }
}
