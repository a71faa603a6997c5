import Foundation

/// A caption or subtitle track as Ferry stores it: WebVTT cues, read from WebVTT or SubRip (SRT) text.
///
/// Reading is strict where players disagree and lenient where they agree: line endings may be `\r\n`, `\r` or `\n`,
/// a byte order mark is dropped, SRT's `,` before milliseconds becomes `.`, and `NOTE` blocks are dropped. A cue needs
/// a timing line whose end is after its start and a payload without `-->`. `STYLE` and `REGION` blocks before the
/// first cue are kept (without `-->`, which a player would read as a cue's timing, and at most
/// ``maxHeaderBytes`` in all: they are repeated in every segment of the track's HLS rendition). What cannot be read
/// is refused with the line it was found on.
package struct WebVTT: Sendable, Equatable {
    /// One cue: its times in milliseconds, its settings (`line:0 align:start`) and its text lines.
    package struct Cue: Sendable, Equatable {
        package var identifier: String?
        package var start: Int64
        package var end: Int64
        package var settings: String
        package var payload: [String]
    }

    /// Header blocks kept from a WebVTT source (`STYLE`, `REGION`), each as its text.
    package var headerBlocks: [String]
    /// Cues, in the source's order.
    package var cues: [Cue]

    /// Largest text read (bytes).
    package static let maxSourceBytes = 1 << 20
    /// Most cues in one track.
    package static let maxCues = 20_000
    /// Latest cue end: 100 hours.
    static let maxMilliseconds: Int64 = 100 * 3_600_000
    /// Most bytes of `STYLE` and `REGION` blocks in one track.
    package static let maxHeaderBytes = 16 * 1024

    /// Why a text is not a track.
    package struct Malformed: Error, Equatable, CustomStringConvertible {
        /// What is wrong, naming the line.
        package var reason: String
        package var description: String { reason }
    }

    private init(headerBlocks: [String], cues: [Cue]) {
        self.headerBlocks = headerBlocks
        self.cues = cues
    }

    /// Reads WebVTT (text starting with `WEBVTT`) or SRT.
    package init(parsing text: String) throws(Malformed) {
        guard text.utf8.count <= Self.maxSourceBytes else {
            throw Malformed(reason: "is larger than \(Self.maxSourceBytes) bytes.")
        }
        // As a WebVTT parser reads text: NUL becomes U+FFFD.
        var normalised = text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .replacingOccurrences(of: "\u{0}", with: "\u{FFFD}")
        if normalised.hasPrefix("\u{FEFF}") { normalised.removeFirst() }
        let lines = normalised.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if let first = lines.first, first == "WEBVTT" || first.hasPrefix("WEBVTT ") || first.hasPrefix("WEBVTT\t") {
            self = try Self.readWebVTT(lines)
        } else {
            self = try Self.readSRT(lines)
        }
        guard !cues.isEmpty else { throw Malformed(reason: "has no cues.") }
        // What is stored and read again is the track as written here, which can be longer than its source (SRT's `&`
        // becomes `&amp;`, `mm:ss.ttt` is written in full): it must be readable too.
        guard self.text().utf8.count <= Self.maxSourceBytes else {
            throw Malformed(
                reason: "is larger than \(Self.maxSourceBytes) bytes once written as WebVTT (timestamps in full, SRT's "
                    + "& and < escaped).")
        }
    }

    /// Blocks of lines that `endsBlock` (given a line's index) does not take as a separator, with the number of each
    /// block's first line (1-based).
    private static func blocks(
        _ lines: [String], from start: Int, endsBlock: (Int) -> Bool
    ) -> [(line: Int, lines: [String])] {
        var result: [(Int, [String])] = []
        var current: [String] = []
        var first = 0
        for index in start..<lines.count {
            let line = lines[index]
            if endsBlock(index) {
                if !current.isEmpty { result.append((first + 1, current)) }
                current = []
            } else {
                if current.isEmpty { first = index }
                current.append(line)
            }
        }
        if !current.isEmpty { result.append((first + 1, current)) }
        return result
    }

    /// Reads WebVTT as its parser does in one respect SRT readers do not: only an empty line ends a block, so a line
    /// of spaces is one of the cue's text lines, except as its last line or before what begins another block (a timing
    /// line, with or without a cue identifier before it, or a NOTE), as the file's author meant it.
    private static func readWebVTT(_ lines: [String]) throws(Malformed) -> WebVTT {
        // The header runs to the first blank line.
        var start = 1
        while start < lines.count, !isBlank(lines[start]) { start += 1 }
        var header: [String] = []
        var cues: [Cue] = []
        // Whether the first line from each on that is not a line of spaces is absent, empty, or begins a block (a
        // timing line, a cue identifier before one, a NOTE): one pass from the end, so that a run of such lines is
        // looked at once.
        var endsFrom = [Bool](repeating: true, count: lines.count + 1)
        for index in lines.indices.reversed() {
            let line = lines[index]
            let beginsBlock =
                line.contains("-->") || index + 1 < lines.count && lines[index + 1].contains("-->")
                || line == "NOTE" || line.hasPrefix("NOTE ") || line.hasPrefix("NOTE\t")
            endsFrom[index] = line.isEmpty || (isBlank(line) ? endsFrom[index + 1] : beginsBlock)
        }
        let separated = blocks(lines, from: start) { index in
            lines[index].isEmpty || isBlank(lines[index]) && endsFrom[index + 1]
        }
        for block in separated {
            let first = block.lines[0]
            if first == "NOTE" || first.hasPrefix("NOTE ") || first.hasPrefix("NOTE\t") { continue }
            if first == "STYLE" || first == "REGION" {
                guard cues.isEmpty else { throw Malformed(reason: "has a \(first) block after a cue (line \(block.line)).") }
                // A player ends the block at a line with `-->` and reads a cue from it, past every check here.
                if let index = block.lines.firstIndex(where: { $0.contains("-->") }) {
                    throw Malformed(reason: "has a \(first) block with a line containing --> (line \(block.line + index)).")
                }
                header.append(block.lines.joined(separator: "\n"))
                guard header.reduce(0, { $0 + $1.utf8.count }) <= maxHeaderBytes else {
                    throw Malformed(reason: "has more than \(maxHeaderBytes) bytes of STYLE and REGION blocks (line \(block.line)).")
                }
                continue
            }
            let timingIndex = first.contains("-->") ? 0 : 1
            guard timingIndex < block.lines.count, block.lines[timingIndex].contains("-->") else {
                throw Malformed(reason: "has a block without a cue timing line (line \(block.line)).")
            }
            var cue = try timing(block.lines[timingIndex], line: block.line + timingIndex, comma: false)
            cue.identifier = timingIndex == 1 ? first : nil
            cue.payload = Array(block.lines[(timingIndex + 1)...])
            try append(cue, to: &cues, line: block.line)
        }
        return WebVTT(headerBlocks: header, cues: cues)
    }

    private static func readSRT(_ lines: [String]) throws(Malformed) -> WebVTT {
        var cues: [Cue] = []
        for block in blocks(lines, from: 0, endsBlock: { isBlank(lines[$0]) }) {
            // A counter line, then the timing line; some writers leave the counter out.
            let timingIndex = block.lines[0].contains("-->") ? 0 : 1
            guard timingIndex < block.lines.count, block.lines[timingIndex].contains("-->") else {
                throw Malformed(
                    reason: "is neither WebVTT (its first line is not WEBVTT) nor SRT (no cue timing at line \(block.line)).")
            }
            var cue = try timing(block.lines[timingIndex], line: block.line + timingIndex, comma: true)
            cue.payload = block.lines[(timingIndex + 1)...].map { escapeSRTText(stripFontTags($0)) }
            try append(cue, to: &cues, line: block.line)
        }
        return WebVTT(headerBlocks: [], cues: cues)
    }

    /// A line of nothing but spaces and tabs (or nothing).
    private static func isBlank(_ line: String) -> Bool {
        line.allSatisfy { $0 == " " || $0 == "\t" }
    }

    private static func append(_ cue: Cue, to cues: inout [Cue], line: Int) throws(Malformed) {
        guard cues.count < maxCues else { throw Malformed(reason: "has more than \(maxCues) cues.") }
        if cue.payload.contains(where: { $0.contains("-->") }) {
            throw Malformed(reason: "has a cue whose text contains --> (line \(line)).")
        }
        cues.append(cue)
    }

    /// `00:01:02.500 --> 00:01:04.000 align:start`; with `comma`, SRT's `00:01:02,500` is read too.
    private static func timing(_ text: String, line: Int, comma: Bool) throws(Malformed) -> Cue {
        let halves = text.components(separatedBy: "-->")
        guard halves.count == 2 else { throw Malformed(reason: "has an unreadable cue timing (line \(line)).") }
        let right = halves[1].split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard let startText = halves[0].split(whereSeparator: { $0 == " " || $0 == "\t" }).last,
            halves[0].split(whereSeparator: { $0 == " " || $0 == "\t" }).count == 1, let endText = right.first,
            let start = timestamp(String(startText), comma: comma), let end = timestamp(String(endText), comma: comma)
        else { throw Malformed(reason: "has an unreadable cue timing (line \(line)).") }
        guard end > start else { throw Malformed(reason: "has a cue that does not end after it starts (line \(line)).") }
        guard end <= maxMilliseconds else { throw Malformed(reason: "has a cue later than 100 hours (line \(line)).") }
        return Cue(identifier: nil, start: start, end: end, settings: comma ? "" : right.dropFirst().joined(separator: " "), payload: [])
    }

    /// Milliseconds of `[hh:]mm:ss.ttt` (or `,ttt`), nil when it is not one.
    static func timestamp(_ text: String, comma: Bool) -> Int64? {
        let separators: Set<Character> = comma ? [".", ","] : ["."]
        guard let dot = text.lastIndex(where: { separators.contains($0) }) else { return nil }
        let fraction = text[text.index(after: dot)...]
        let clock = text[..<dot].split(separator: ":", omittingEmptySubsequences: false)
        guard fraction.count == 3, fraction.allSatisfy({ $0.isASCII && $0.isNumber }), let millis = Int64(fraction),
            (2...3).contains(clock.count),
            clock.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy { $0.isASCII && $0.isNumber } })
        else { return nil }
        let numbers = clock.compactMap { Int64($0) }
        let (hours, minutes, seconds) = numbers.count == 3 ? (numbers[0], numbers[1], numbers[2]) : (0, numbers[0], numbers[1])
        guard minutes < 60, seconds < 60, clock.last?.count == 2 else { return nil }
        return ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis
    }

    /// SRT text as WebVTT cue text: a `&` that starts no character reference becomes `&amp;`, and a `<` that starts
    /// no tag SRT has (`<i>`, `<b>`, `<u>` and their ends) `&lt;`, so that `a < b & c` reads as written (WebVTT
    /// takes both as markup).
    static func escapeSRTText(_ line: String) -> String {
        let bytes = Array(line.utf8)
        let (ampersand, less) = (UInt8(ascii: "&"), UInt8(ascii: "<"))
        guard bytes.contains(where: { $0 == ampersand || $0 == less }) else { return line }
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
        // `&name;`, `&#123;`, `&#x1F;`: up to 8 letters, digits or a leading `#`, then `;`.
        func startsReference(_ index: Int) -> Bool {
            var end = index + 1
            while end < bytes.count, end - index <= 9, isAlphanumeric(bytes[end]) || (end == index + 1 && bytes[end] == 0x23) {
                end += 1
            }
            return end > index + 1 && end < bytes.count && bytes[end] == UInt8(ascii: ";")
        }
        func startsTag(_ index: Int) -> Bool {
            var next = index + 1
            if next < bytes.count, bytes[next] == UInt8(ascii: "/") { next += 1 }
            guard next + 1 < bytes.count else { return false }
            return [UInt8(ascii: "i"), UInt8(ascii: "b"), UInt8(ascii: "u")].contains(bytes[next] | 0x20)
                && bytes[next + 1] == UInt8(ascii: ">")
        }
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count + 16)
        for (index, byte) in bytes.enumerated() {
            if byte == ampersand, !startsReference(index) {
                result += Array("&amp;".utf8)
            } else if byte == less, !startsTag(index) {
                result += Array("&lt;".utf8)
            } else {
                result.append(byte)
            }
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// SRT's `<font …>` and `</font>` tags (any case), which WebVTT has not; one pass over the line, so its time grows
    /// with its length only.
    static func stripFontTags(_ line: String) -> String {
        let bytes = Array(line.utf8)
        guard let lastClose = bytes.lastIndex(of: UInt8(ascii: ">")) else { return line }
        func starts(_ tag: StaticString, at index: Int) -> Bool {
            let count = tag.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            return (0..<count).allSatisfy { offset in
                let byte = bytes[index + offset]
                return (byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte) == tag.utf8Start[offset]
            }
        }
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "<"), index < lastClose {
                if starts("</font>", at: index) {
                    index += 7
                    continue
                }
                // The search ends at the first `>`, and the scan resumes past it: every byte is looked at once.
                if starts("<font", at: index), let close = bytes[(index + 5)...].firstIndex(of: UInt8(ascii: ">")) {
                    index = close + 1
                    continue
                }
            }
            result.append(bytes[index])
            index += 1
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// `hh:mm:ss.ttt`.
    static func format(_ milliseconds: Int64) -> String {
        let hours = milliseconds / 3_600_000
        let minutes = milliseconds / 60_000 % 60
        let seconds = milliseconds / 1000 % 60
        return String(format: "%02lld:%02lld:%02lld.%03lld", hours, minutes, seconds, milliseconds % 1000)
    }

    /// The track as one WebVTT file.
    package func text() -> String {
        render(cues, timestampMap: false)
    }

    /// The cues that show during `[start, end)` milliseconds, as one WebVTT segment of an HLS subtitle rendition:
    /// its `X-TIMESTAMP-MAP` says that cue times are the media's own times (the renditions start at 0). It ends with
    /// a blank line, so that a reader that joins segments (ffmpeg's HLS demuxer does) never reads the next segment's
    /// header as cue text.
    package func segment(from start: Int64, to end: Int64) -> String {
        render(cues.filter { $0.start < end && $0.end > start }, timestampMap: true) + "\n"
    }

    private func render(_ cues: [Cue], timestampMap: Bool) -> String {
        var text = "WEBVTT\n"
        if timestampMap { text += "X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n" }
        for block in headerBlocks { text += "\n" + block + "\n" }
        for cue in cues {
            text += "\n"
            if let identifier = cue.identifier { text += identifier + "\n" }
            text += Self.format(cue.start) + " --> " + Self.format(cue.end)
            if !cue.settings.isEmpty { text += " " + cue.settings }
            text += "\n"
            for line in cue.payload { text += line + "\n" }
        }
        return text
    }
}
