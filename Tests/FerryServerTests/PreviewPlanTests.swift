import FerryStorage
import Foundation
import Testing

@testable import FerryMedia

@Suite("Preview requests and storyboard plans (pure)", .timeLimit(.minutes(10)))
struct PreviewPlanTests {
    @Test("a storyboard keeps to 100 tiles of whole seconds, ten to a row, and its cues run back to back to the duration")
    func storyboardPlans() throws {
        let short = try #require(StoryboardPlan(duration: 3.02))
        #expect(short.interval == 1 && short.count == 4 && short.columns == 4 && short.rows == 1)
        let hour = try #require(StoryboardPlan(duration: 3600))
        #expect(hour.interval == 36 && hour.count == 100 && hour.columns == 10 && hour.rows == 10)
        let odd = try #require(StoryboardPlan(duration: 250.5))
        #expect(odd.interval == 3 && odd.count == 84 && odd.rows == 9)
        #expect(StoryboardPlan(duration: nil) == nil && StoryboardPlan(duration: 0) == nil)
        #expect(StoryboardPlan(duration: 1e300) == nil)

        let vtt = odd.vtt(tileHeight: 90)
        let lines = vtt.split(separator: "\n").map(String.init)
        #expect(lines.first == "WEBVTT")
        let timings = lines.filter { $0.contains(" --> ") }
        #expect(timings.count == 84)
        #expect(timings.first == "00:00:00.000 --> 00:00:03.000")
        #expect(timings.last == "00:04:09.000 --> 00:04:10.500")
        #expect(lines.contains("storyboard.jpg#xywh=480,720,160,90"))  // tile 83: row 8, column 3
        #expect(StoryboardPlan.timestamp(3723.4567) == "01:02:03.457")
    }

    @Test("preview parameters: defaults, normalised names, and a reason for each refusal")
    func previewRequests() throws {
        #expect(try PreviewRequest.parse(file: "master.m3u8", query: [:], duration: 10) == nil)
        let still = try #require(try PreviewRequest.parse(file: "thumbnail.jpg", query: ["time": "2.0004", "width": "320"], duration: 10))
        #expect(still.cacheName == "previews/thumbnail-t2000-w320-hauto-preserve.jpg")
        let same = try #require(try PreviewRequest.parse(file: "thumbnail.jpg", query: ["width": "320", "time": "2", "fit_mode": "crop"], duration: 10))
        #expect(same.cacheName == still.cacheName, "a fit without a box is no different picture")
        let boxed = try #require(try PreviewRequest.parse(
            file: "thumbnail.webp", query: ["width": "200", "height": "100", "fit_mode": "pad", "token": "x"], duration: 10))
        #expect(boxed.cacheName == "previews/thumbnail-t0-w200-h100-pad.webp")
        let negativeZero = try #require(try PreviewRequest.parse(file: "thumbnail.jpg", query: ["time": "-0"], duration: 10))
        #expect(negativeZero.cacheName == "previews/thumbnail-t0-wauto-hauto-preserve.jpg", "-0 is 0, one picture")
        // A rendition can last a frame or two longer than the source: its duration (GetPlayInfo's) is the last frame.
        let atEnd = try #require(try PreviewRequest.parse(file: "thumbnail.jpg", query: ["time": "10.011"], duration: 10))
        #expect(atEnd.cacheName == "previews/thumbnail-t10000-wauto-hauto-preserve.jpg")
        #expect(boxed.scaleFilter.contains("pad=200:100"))
        let animation = try #require(try PreviewRequest.parse(file: "animated.gif", query: ["start": "8"], duration: 10))
        #expect(animation.end == 10 && animation.width == 320 && animation.fps == 10)
        #expect(animation.cacheName == "previews/animated-s8000-e10000-w320-hauto-f10.gif")
        #expect(animation.arguments(input: "in.mp4", offset: 1, output: "out.gif").contains("2.000"))

        let refusals: [(String, [String: String], String)] = [
            ("thumbnail.jpg", ["time": "25"], "past the end"), ("thumbnail.jpg", ["time": "20.2"], "past the end"), ("thumbnail.jpg", ["time": "nan"], "time must be"),
            ("thumbnail.jpg", ["time": "0x1"], "time must be"), ("thumbnail.jpg", ["time": "1e1"], "time must be"),
            ("thumbnail.png", ["width": "1921"], "width must be"), ("thumbnail.png", ["height": "15"], "height must be"),
            ("thumbnail.png", ["fit_mode": "fill"], "fit_mode must be"), ("thumbnail.png", ["end": "1"], "does not apply"),
            ("animated.webp", ["start": "0", "end": "10.001"], "at most 10 seconds"),
            ("animated.webp", ["start": "3", "end": "3"], "after start"), ("animated.gif", ["fps": "0"], "fps must be"),
            ("animated.gif", ["width": "641"], "width must be"),
        ]
        // One picture per URL: a preview parameter given twice is refused; other names (the token) are not read here.
        #expect(try PreviewRequest.query([("time", "1"), ("token", "a"), ("token", "b")]) == ["time": "1", "token": "a"])
        #expect {
            _ = try PreviewRequest.query([("width", "100"), ("time", "1"), ("time", "2")])
        } throws: { error in
            (error as? FerryDomainError)?.code == .invalidArgument
                && (error as? FerryDomainError)?.message.contains("time is given more than once") == true
        }
        for (file, query, reason) in refusals {
            #expect {
                _ = try PreviewRequest.parse(file: file, query: query, duration: 20)
            } throws: { error in
                guard let error = error as? FerryDomainError else { return false }
                return error.code == .invalidArgument && error.message.contains(reason)
            }
        }
    }
}
