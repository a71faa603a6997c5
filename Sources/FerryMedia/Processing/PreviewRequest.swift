import FerryStorage
import Foundation

/// A picture of a video asked for on its playback path, validated: a still (`thumbnail.{jpg,png,webp}`) at a time,
/// or a short animation (`animated.{gif,webp}`) of a stretch of it.
///
/// Parameters come from the query: `time`, `width`, `height`, `fit_mode` for a still; `start`, `end`, `width`,
/// `fps` for an animation. Anything out of bounds is refused with a reason (an `invalidArgument` domain error,
/// 400 on the wire) before any work is done. ``cacheName`` is the normalised form: two requests that ask for the same
/// picture share one name, so the second is served from the store.
package struct PreviewRequest: Sendable, Hashable {
    /// A still or an animation.
    package enum Kind: String, Sendable, Hashable {
        case thumbnail
        case animated
    }

    /// How a still is fitted into a width and a height given together.
    package enum Fit: String, Sendable, Hashable, CaseIterable {
        /// Inside the box, the aspect ratio kept (the picture may be smaller than the box on one side).
        case preserve
        /// Covers the box, the aspect ratio kept, what overflows cut off (centred).
        case crop
        /// Inside the box, the aspect ratio kept, the rest filled with black: exactly the box.
        case pad
        /// Exactly the box, the aspect ratio ignored.
        case stretch
    }

    /// The bounds a request must keep.
    package enum Bounds {
        /// Side lengths of a still, in pixels.
        package static let thumbnailSide = 16...1920
        /// Width of an animation, in pixels.
        package static let animatedWidth = 16...640
        /// Frames per second of an animation.
        package static let animatedFPS = 1...30
        /// Longest animation, in seconds.
        package static let animatedSeconds = 10.0
        /// An animation's width when none is asked for.
        package static let defaultAnimatedWidth = 320
        /// An animation's frame rate when none is asked for.
        package static let defaultAnimatedFPS = 10
        /// The latest time asked for when the video's duration is not known: the longest duration a probe keeps.
        package static let maxSeconds = ProbeReport.maxDuration
    }

    /// Still or animation.
    package var kind: Kind
    /// The file's extension: `jpg`, `png`, `webp` (stills); `gif`, `webp` (animations).
    package var format: String
    /// Where a still is taken, or where an animation starts, in seconds.
    package var start: Double
    /// Where an animation ends, in seconds (a still: ``start``).
    package var end: Double
    /// Width asked for; nil keeps the source's (a still) or the default (an animation).
    package var width: Int?
    /// Height asked for (stills only); nil follows the width.
    package var height: Int?
    /// How a still fits a width and a height given together.
    package var fit: Fit
    /// Frames per second (animations only).
    package var fps: Int

    /// Whether a playback file name names a preview (`thumbnail.jpg`, `animated.gif`, …).
    package static func isPreviewFile(_ file: String) -> Bool {
        kind(of: file) != nil
    }

    private static func kind(of file: String) -> (Kind, String)? {
        switch file {
        case "thumbnail.jpg", "thumbnail.png", "thumbnail.webp":
            return (.thumbnail, String(file.dropFirst("thumbnail.".count)))
        case "animated.gif", "animated.webp":
            return (.animated, String(file.dropFirst("animated.".count)))
        default:
            return nil
        }
    }

    /// Reads a request for `file` (nil when it names no preview), checking its parameters against the video's
    /// duration (when known).
    ///
    /// - Throws: ``FerryDomainError`` `invalidArgument` naming the parameter that is out of bounds.
    package static func parse(file: String, query: [String: String], duration: Double?) throws -> PreviewRequest? {
        guard let named = Self.kind(of: file) else { return nil }
        let (kind, format) = named
        let known: Set<String> =
            kind == .thumbnail ? ["time", "width", "height", "fit_mode"] : ["start", "end", "width", "fps"]
        // The playback URL's own credential travels in the query too: only unknown preview-looking names are refused.
        for name in query.keys.sorted() where !known.contains(name) && Self.previewParameterNames.contains(name) {
            throw invalid("\(name) does not apply to \(file).")
        }
        let limit = duration.flatMap { $0 > 0 ? $0 : nil }
        func seconds(_ name: String, default value: Double) throws -> Double {
            guard let text = query[name] else { return value }
            // Decimal digits only (Double also reads `0x1`, `nan`, `-0`); -0 is 0, one picture under one name.
            guard text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "." || $0 == "-") }),
                let number = Double(text).map({ $0 + 0 }), number.isFinite, (0...Bounds.maxSeconds).contains(number)
            else {
                throw invalid("\(name) must be a number of seconds from 0 to \(Int(Bounds.maxSeconds)), in decimal digits (e.g. 12.5).")
            }
            // The renditions' durations (what GetPlayInfo tells) can pass the source's by a frame or two: a time up
            // to a tenth of a second past its end is its end.
            if let limit, number > limit + 0.1 {
                throw invalid("\(name) \(text) is past the end of the video (\(String(format: "%.3f", limit)) s).")
            }
            return (min(number, limit ?? number) * 1000).rounded() / 1000
        }
        func number(_ name: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = query[name] else { return nil }
            guard let number = Int(text), range.contains(number) else {
                throw invalid("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound).")
            }
            return number
        }
        switch kind {
        case .thumbnail:
            let time = try seconds("time", default: 0)
            let fitText = query["fit_mode"] ?? Fit.preserve.rawValue
            guard let fit = Fit(rawValue: fitText) else {
                throw invalid("fit_mode must be one of \(Fit.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
            return PreviewRequest(
                kind: kind, format: format, start: time, end: time,
                width: try number("width", Bounds.thumbnailSide), height: try number("height", Bounds.thumbnailSide),
                fit: fit, fps: 1)
        case .animated:
            let start = try seconds("start", default: 0)
            let fallbackEnd = min(start + 3, limit ?? start + 3)
            let end = try seconds("end", default: fallbackEnd)
            guard end > start else { throw invalid("end must be after start.") }
            guard end - start <= Bounds.animatedSeconds else {
                throw invalid("An animation lasts at most \(Int(Bounds.animatedSeconds)) seconds (end - start).")
            }
            let fps = try number("fps", Bounds.animatedFPS)
            return PreviewRequest(
                kind: kind, format: format, start: start, end: end,
                width: try number("width", Bounds.animatedWidth) ?? Bounds.defaultAnimatedWidth, height: nil,
                fit: .preserve, fps: fps ?? Bounds.defaultAnimatedFPS)
        }
    }

    /// Every query name a preview reads.
    private static let previewParameterNames: Set<String> = ["time", "width", "height", "fit_mode", "start", "end", "fps"]

    /// The query's preview parameters, each once (a URL names one picture: of two values given for one name either
    /// could be read), with any other names; throws `invalidArgument` for a preview parameter given twice.
    package static func query(_ pairs: some Sequence<(String, String)>) throws -> [String: String] {
        var query: [String: String] = [:]
        for (name, value) in pairs {
            guard query[name] == nil else {
                if previewParameterNames.contains(name) { throw invalid("\(name) is given more than once.") }
                continue
            }
            query[name] = value
        }
        return query
    }

    private static func invalid(_ message: String) -> FerryDomainError {
        FerryDomainError(.invalidArgument, message)
    }

    /// The normalised name the picture is kept under in the store, below the video's prefix: the same for every
    /// request that asks for the same picture.
    package var cacheName: String {
        let size = "w\(width.map(String.init) ?? "auto")-h\(height.map(String.init) ?? "auto")"
        switch kind {
        case .thumbnail:
            let fitName = width != nil && height != nil ? fit.rawValue : Fit.preserve.rawValue
            return "previews/thumbnail-t\(Self.millis(start))-\(size)-\(fitName).\(format)"
        case .animated:
            return "previews/animated-s\(Self.millis(start))-e\(Self.millis(end))-\(size)-f\(fps).\(format)"
        }
    }

    private static func millis(_ seconds: Double) -> String {
        String(format: "%.0f", (seconds * 1000).rounded())
    }

    /// The video filter that sizes the picture. The side asked for is kept, and the other follows the video's shape
    /// (to the nearest even number, as ffmpeg's `-2`) up to a bound (``Bounds/thumbnailSide``, twice the widest
    /// animation), past which the picture is squeezed: a video 2 pixels wide and 4,000 high would otherwise ask for a
    /// picture of a third of a million pixels' side, and ffmpeg for a gigabyte to make it.
    var scaleFilter: String {
        let side = Bounds.thumbnailSide.upperBound
        switch (kind, width, height) {
        case (.animated, let width, _):
            let width = width ?? Bounds.defaultAnimatedWidth
            let height = Self.following("ih*\(width)/iw", upTo: Bounds.animatedWidth.upperBound * 2)
            return "fps=\(fps):round=up,scale=\(width):\(height):flags=lanczos"
        case (.thumbnail, nil, nil):
            return "scale='min(iw,\(side))':'min(ih,\(side))':force_original_aspect_ratio=decrease"
        case (.thumbnail, let width?, nil):
            return "scale=\(width):\(Self.following("ih*\(width)/iw", upTo: side))"
        case (.thumbnail, nil, let height?):
            return "scale=\(Self.following("iw*\(height)/ih", upTo: side)):\(height)"
        case (.thumbnail, let width?, let height?):
            switch fit {
            case .preserve:
                return "scale=\(width):\(height):force_original_aspect_ratio=decrease"
            case .crop:
                return "scale=\(width):\(height):force_original_aspect_ratio=increase,crop=\(width):\(height)"
            case .pad:
                return "scale=\(width):\(height):force_original_aspect_ratio=decrease,"
                    + "pad=\(width):\(height):(ow-iw)/2:(oh-ih)/2:black"
            case .stretch:
                return "scale=\(width):\(height)"
            }
        }
    }

    /// The side that follows the one asked for: `size` (an ffmpeg expression) to the nearest even number, 2 to
    /// `bound`.
    private static func following(_ size: String, upTo bound: Int) -> String {
        "'max(2,min(\(bound),round(\(size)/2)*2))'"
    }

    /// The ffmpeg arguments that make the picture from `input`, starting `offset` seconds into that file.
    ///
    /// A file made of HLS segments keeps the timestamps of the whole video, offset differently per stream (audio
    /// packets start before the first frame, B-frames delay it), so seeking by time would miss the frame: with
    /// `countsFromFirstFrame`, the whole file is decoded and the offset counted from its first frame instead.
    func arguments(input: String, offset: Double, countsFromFirstFrame: Bool = false, output: String) -> [String] {
        var arguments = TranscodePlan.quietFlags
        let length = String(format: "%.3f", end - start)
        let from = String(format: "%.3f", max(0, offset))
        // Sized as displayed: a source's pixels (the first stream's) may not be square.
        var scaleFilter = MediaInput.squarePixels + "," + scaleFilter
        if countsFromFirstFrame {
            let selection =
                kind == .animated
                ? "select='gte(t-start_t,\(from))*lt(t-start_t,\(from)+\(length))',setpts=PTS-STARTPTS,trim=duration=\(length)"
                : "select='gte(t-start_t,\(from))',setpts=PTS-STARTPTS"
            scaleFilter = selection + "," + scaleFilter
        } else {
            arguments += ["-ss", from]
            if kind == .animated { arguments += ["-t", length] }
        }
        arguments += MediaInput.options + ["-i", input, "-map", "0:V:0", "-an", "-sn", "-dn"]
        // The frame rate filter would repeat the last frame up to where the whole file ends: the animation is cut at
        // its length on output too.
        if countsFromFirstFrame, kind == .animated { arguments += ["-t", length] }
        // Sized in 4:4:4: with 4:2:0 chroma, crop and pad would round an odd side down (or refuse it).
        let stillFilter = scaleFilter + ",format=yuv444p,setsar=1"
        switch (kind, format) {
        case (.thumbnail, "jpg"):
            arguments += ["-vf", stillFilter, "-frames:v", "1", "-q:v", "3", "-f", "image2", "-c:v", "mjpeg"]
        case (.thumbnail, "png"):
            arguments += ["-vf", stillFilter, "-frames:v", "1", "-f", "image2", "-c:v", "png"]
        case (.thumbnail, _):
            arguments += ["-vf", stillFilter, "-frames:v", "1", "-f", "webp", "-c:v", "libwebp", "-quality", "80"]
        case (.animated, "gif"):
            arguments += [
                "-vf", scaleFilter + ",split[a][b];[a]palettegen=stats_mode=diff[p];[b][p]paletteuse=dither=bayer",
                "-loop", "0", "-f", "gif",
            ]
        case (.animated, _):
            arguments += [
                "-vf", scaleFilter, "-c:v", "libwebp_anim", "-lossless", "0", "-quality", "70", "-loop", "0", "-f", "webp",
            ]
        }
        return arguments + [output]
    }
}
