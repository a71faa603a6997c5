import Foundation

/// Text the command line shows people. Much of it comes from the service or from the disk (a VideoId, a title, an
/// error message, a playback URL, a file name), and a hostile or broken service could put terminal escapes in it that
/// clear the screen, forge lines or hide the rest of the line, or send a value of megabytes. Every line for people goes
/// through ``safe(_:)``, and every JSON line through ``safeJSON(_:)``, on its way out (``say(_:)``, ``complain(_:)``,
/// ``sayJSON(_:)``).
enum TerminalText {
    /// The most characters of a line for people; the rest is cut and counted.
    static let longestLine = 4_096

    /// What a line for people says of a failure: the first line of `message`, without the library's detail a transport
    /// error appends (` Detail: …`).
    static func headline(_ message: String) -> String {
        let words = message.components(separatedBy: " Detail: ").first ?? message
        return words.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? ""
    }

    /// `text` with every control character but the tab (C0, DEL, C1) and every bidirectional formatting character
    /// written as a visible escape (`\u{1B}`), cut to ``longestLine`` characters unless `whole` (a value to copy, such
    /// as a URL or a key, which a cut would break).
    static func safe(_ text: String, whole: Bool = false) -> String {
        var out = String.UnicodeScalarView()
        var count = 0
        var cut = 0
        for scalar in text.unicodeScalars {
            guard count < longestLine || whole else {
                cut += 1
                continue
            }
            if scalar != "\t" && needsEscape(scalar) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
            count += 1
        }
        var result = String(out)
        if cut > 0 { result += "… (\(cut) more characters)" }
        return result
    }

    /// One value in a tab-separated row: ``safe(_:)`` with the tab escaped too, so that a value cannot add a column.
    static func field(_ text: String) -> String {
        safe(text.replacingOccurrences(of: "\t", with: "\\t"))
    }

    /// A line of JSON with the C1 controls and bidirectional formatting characters that JSON allows raw in strings,
    /// and any other control character but JSON's white space (raw in a string only in invalid JSON), written as
    /// `\uXXXX` escapes (the same string for a JSON reader); its length is kept, for programs read it.
    static func safeJSON(_ json: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if needsEscape(scalar) && !["\n", "\r", "\t"].contains(scalar) {
                out.append(contentsOf: String(format: "\\u%04x", scalar.value).unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// C0 controls, DEL, C1 controls, and the characters that reorder or isolate text (U+061C, U+200E, U+200F,
    /// U+202A–U+202E, U+2066–U+2069).
    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}

/// Writes `text` to `handle` at once (unbuffered, so scripts and tests see it while the server runs). Output whose
/// reader went away (`ferry videos list | head -1`: a closed pipe) is dropped and the command carries on, to end with
/// ``ExitCodes/outputLost`` when it was standard output's (``StandardOutput/lost``).
func write(_ text: String, to handle: FileHandle = .standardOutput) {
    do {
        try handle.write(contentsOf: Data(text.utf8))
    } catch {
        if handle.fileDescriptor == FileHandle.standardOutput.fileDescriptor { StandardOutput.lose() }
    }
}

/// Whether something written to standard output was lost.
enum StandardOutput {
    // Every access holds `lock`.
    nonisolated(unsafe) private static var wasLost = false
    private static let lock = NSLock()

    /// Notes that a write to standard output failed.
    static func lose() { lock.withLock { wasLost = true } }

    /// Whether a write to standard output failed.
    static var lost: Bool { lock.withLock { wasLost } }
}

/// Writes a line for people to standard output, made safe by ``TerminalText/safe(_:)``.
func say(_ line: String) {
    write(TerminalText.safe(line) + "\n")
}

/// Writes a value to copy (a URL, a key, a secret) as a line of its own on standard output: control characters made
/// visible as ``say(_:)`` does, and never cut.
func sayWhole(_ line: String) {
    write(TerminalText.safe(line, whole: true) + "\n")
}

/// Writes a line for people to standard error, made safe by ``TerminalText/safe(_:)``.
func complain(_ line: String) {
    write(TerminalText.safe(line) + "\n", to: .standardError)
}

/// Writes a line of JSON to standard output, made safe by ``TerminalText/safeJSON(_:)``.
func sayJSON(_ line: String) {
    write(TerminalText.safeJSON(line) + "\n")
}
