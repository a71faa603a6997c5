import Foundation

/// Where the CLI keeps the embedded service's data when no `--data-dir` or `FERRY_DATA_DIR` names it: `~/.ferry`, with
/// `~` taken from `HOME` (the account's home directory only when `HOME` is unset), so tests, CI and users with their
/// own `HOME` never share one directory by accident.
func defaultDataDirectory(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
    let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    return (home.hasSuffix("/") ? String(home.dropLast()) : home) + "/.ferry"
}

/// The region commands sign for and `ferry serve` reports when no `--region` names it: `FERRY_REGION` when set and not
/// empty, else `us-east-1`.
func defaultRegion(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
    environment["FERRY_REGION"].flatMap { $0.isEmpty ? nil : $0 } ?? "us-east-1"
}
