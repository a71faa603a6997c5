import Ferry
import FerryCore
import FerryTestSupport
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import FerryMedia
@testable import FerryServer
@testable import FerryStorage

@Suite("Subtitle tracks: WebVTT and SRT reading, HLS subtitle groups", .timeLimit(.minutes(2)))
struct SubtitleFormatTests {
    @Test("SRT becomes WebVTT: counters dropped, commas become dots, font tags removed, CRLF and BOM accepted")
    func srtConversion() throws {
        let srt = "\u{FEFF}1\r\n00:00:01,000 --> 00:00:02,500\r\n<font color=\"red\">Hello</font>\r\nworld\r\n\r\n2\r\n00:00:05,000 --> 00:01:00,000\r\nBye\r\n"
        let track = try WebVTT(parsing: srt)
        #expect(track.cues.count == 2)
        #expect(track.cues[0].start == 1000 && track.cues[0].end == 2500)
        #expect(track.cues[1].start == 5000 && track.cues[1].end == 60000)
        #expect(track.text() == "WEBVTT\n\n00:00:01.000 --> 00:00:02.500\nHello\nworld\n\n00:00:05.000 --> 00:01:00.000\nBye\n")
        // SRT's text is plain but for <i>, <b>, <u>: a bare & or < is escaped for WebVTT; references and tags stay.
        let marked = try WebVTT(parsing: "1\n00:00:01,000 --> 00:00:02,000\n<i>italic</i> & red < <B>blue</B> &amp; 5<6 &#233; &\n")
        #expect(marked.cues.first?.payload == ["<i>italic</i> &amp; red &lt; <B>blue</B> &amp; 5&lt;6 &#233; &amp;"])
    }

    @Test("font tags are removed in one pass: any case, unclosed ones kept as text, and a line of 940 KB of tags (minutes of work for a search from the start per tag) is read")
    func fontTags() throws {
        #expect(WebVTT.stripFontTags(#"<FONT color="red">a</Font> <font>b</font>"#) == "a b")
        #expect(WebVTT.stripFontTags("a <font size=2 b") == "a <font size=2 b")
        #expect(WebVTT.stripFontTags("</fon <fon x> é") == "</fon <fon x> é")
        #expect(WebVTT.stripFontTags("x</font") == "x</font")
        let hostile = String(repeating: "<fon", count: 100_000) + String(repeating: "<font>", count: 90_000) + "x"
        #expect(WebVTT.stripFontTags(hostile) == String(repeating: "<fon", count: 100_000) + "x")
        let track = try WebVTT(parsing: "1\n00:00:00,000 --> 00:00:01,000\n" + hostile + "\n")
        #expect(track.cues.first?.payload.first?.hasSuffix("&lt;fonx") == true)
    }

    @Test("WebVTT keeps identifiers, settings and STYLE blocks, drops NOTE blocks, and reads mm:ss timestamps")
    func webVTTReading() throws {
        let vtt = """
            WEBVTT Kind: captions

            STYLE
            ::cue { color: yellow }

            NOTE written by hand

            intro
            00:01.000 --> 00:03.000 align:start line:0
            <v Ann>Hi

            01:00:00.000 --> 01:00:01.250
            Late
            """
        let track = try WebVTT(parsing: vtt)
        #expect(track.headerBlocks == ["STYLE\n::cue { color: yellow }"])
        #expect(track.cues.map(\.identifier) == ["intro", nil])
        #expect(track.cues[0].settings == "align:start line:0")
        #expect(track.cues[1].start == 3_600_000 && track.cues[1].end == 3_601_250)
        let again = try WebVTT(parsing: track.text())
        #expect(again == track)
    }

    @Test("WebVTT: a line of spaces inside a cue is one of its lines (only an empty line ends a cue), one before a timing line or at the end is not; NUL becomes U+FFFD")
    func webVTTLinesOfSpaces() throws {
        let inside = try WebVTT(parsing: "WEBVTT\n\n00:01.000 --> 00:02.000\nHello\n   \nWorld\n")
        #expect(inside.cues.map(\.payload) == [["Hello", "   ", "World"]])
        #expect(try WebVTT(parsing: inside.text()) == inside)
        let between = try WebVTT(parsing: "WEBVTT\n\n00:01.000 --> 00:02.000\nHello\n \t\n  \n00:03.000 --> 00:04.000\nWorld\n  \n")
        #expect(between.cues.map(\.payload) == [["Hello"], ["World"]])
        #expect(between.cues.map(\.start) == [1000, 3000])
        // Before a cue identifier and its timing line, or a NOTE, too.
        let identified = try WebVTT(
            parsing: "WEBVTT\n\nc1\n00:01.000 --> 00:02.000\nfirst\n  \nc2\n00:02.000 --> 00:03.000\nsecond\n \nNOTE hi\n\n2\n00:04.000 --> 00:05.000\nthird\n")
        #expect(identified.cues.map(\.identifier) == ["c1", "c2", "2"])
        #expect(identified.cues.map(\.payload) == [["first"], ["second"], ["third"]])
        #expect(try WebVTT(parsing: "WEBVTT\n\n00:01.000 --> 00:02.000\nA\u{0}B\n").cues[0].payload == ["A\u{FFFD}B"])
        #expect(try WebVTT(parsing: "1\n00:00:01,000 --> 00:00:02,000\nA\u{0}B\n").cues[0].payload == ["A\u{FFFD}B"])
        // A run of such lines is read in one pass (400,000 lines: a scan ahead from each would take minutes).
        let run = try WebVTT(parsing: "WEBVTT\n\n00:01.000 --> 00:02.000\nA\n" + String(repeating: " \n", count: 400_000) + "B\n")
        #expect(run.cues[0].payload.count == 400_002)
    }

    @Test(
        "what is not a track is refused with its reason",
        arguments: [
            ("", "has no cues"),
            ("WEBVTT\n", "has no cues"),
            ("hello there\n", "neither WebVTT"),
            ("WEBVTT\n\n00:00:02.000 --> 00:00:01.000\nbackwards\n", "does not end after it starts"),
            ("WEBVTT\n\n00:00:02.000 --> 00:00:02.000\nno time at all\n", "does not end after it starts"),
            ("WEBVTT\n\n00:00:01.000 --> 00:61:00.000\nsixty-one minutes\n", "unreadable cue timing"),
            ("WEBVTT\n\n00:00:01.0 --> 00:00:02.000\nshort fraction\n", "unreadable cue timing"),
            ("WEBVTT\n\n00:00:00.-99 --> 00:00:01.000\nsigned fraction\n", "unreadable cue timing"),
            ("WEBVTT\n\n00:00:00.+12 --> 00:00:01.000\nsigned fraction\n", "unreadable cue timing"),
            ("1\n00:00:00,-50 --> 00:00:00,-10\nsigned fraction\n", "unreadable cue timing"),
            ("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\na --> b\n", "contains -->"),
            ("WEBVTT\n\njust text\n", "without a cue timing"),
            ("1\n00:00:01,000 -> 00:00:02,000\nx\n", "neither WebVTT"),
            ("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nx\n\nSTYLE\n::cue {}\n", "STYLE block after a cue"),
            ("WEBVTT\n\n999:00:00.000 --> 999:00:01.000\nx\n", "later than 100 hours"),
            // A player reads a cue from a header block's `-->` line, past the checks above.
            ("WEBVTT\n\nSTYLE\n::cue {}\n00:00:00.000 --> 150:00:01.000\ninjected\n\n00:00:01.000 --> 00:00:02.000\nx\n", "STYLE block with a line containing -->"),
            ("WEBVTT\n\nREGION\nid:a\n00:00.000 --> 00:01.000\n\n00:00:01.000 --> 00:00:02.000\nx\n", "REGION block with a line containing -->"),
            ("WEBVTT\n\nSTYLE\n" + String(repeating: "::cue { color: red }\n", count: 800) + "\n00:00:01.000 --> 00:00:02.000\nx\n", "bytes of STYLE and REGION blocks"),
        ])
    func refusals(text: String, reason: String) {
        #expect {
            try WebVTT(parsing: text)
        } throws: { error in
            (error as? WebVTT.Malformed)?.reason.contains(reason) == true
        }
    }

    @Test("a text over 1 MiB is refused before it is read; so is one that would be, once written as WebVTT")
    func sizeBound() throws {
        let big = "WEBVTT\n\n" + String(repeating: "00:00:01.000 --> 00:00:02.000\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n\n", count: 15_000)
        #expect(throws: WebVTT.Malformed.self) { try WebVTT(parsing: big) }
        // The track is stored as written and read again for each segment: each `&` of SRT text is written `&amp;`,
        // each short timestamp in full. Under the limit as sent, over it as written.
        let ampersands = "1\n00:00:01,000 --> 00:00:02,000\n" + String(repeating: "&", count: 500_000) + "\n"
        let shortTimes = "WEBVTT\n\n" + (0..<20_000).map { cue in
            let start = String(format: "%02d:%02d.%03d", cue / 600, (cue / 10) % 60, (cue % 10) * 100)
            return start + " --> 59:59.999\nabcdefghijklmnopqrstuvwxyz\n\n"
        }.joined()
        for text in [ampersands, shortTimes] {
            #expect(text.utf8.count <= WebVTT.maxSourceBytes)
            #expect {
                try WebVTT(parsing: text)
            } throws: { error in
                (error as? WebVTT.Malformed)?.reason.contains("once written as WebVTT") == true
            }
        }
        // Every track read is read again as written.
        let fits = try WebVTT(parsing: "1\n00:00:01,000 --> 00:00:02,000\n" + String(repeating: "&", count: 200_000) + "\n")
        #expect(try WebVTT(parsing: fits.text()) == fits)
    }

    @Test("a segment holds the cues that show during its window, with an X-TIMESTAMP-MAP")
    func segments() throws {
        let track = try WebVTT(parsing: "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\none\n\n00:00:03.500 --> 00:00:09.000\ntwo\n\n00:00:10.000 --> 00:00:11.000\nthree\n")
        let first = track.segment(from: 0, to: 4000)
        #expect(first.hasPrefix("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n"))
        #expect(first.contains("one") && first.contains("two") && !first.contains("three"))
        let second = track.segment(from: 4000, to: 8000)
        #expect(!second.contains("one") && second.contains("two") && !second.contains("three"))
        let empty = track.segment(from: 12000, to: 16000)
        #expect(empty == "WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n")
        #expect(first.hasSuffix("two\n\n"), "a segment ends with a blank line")
    }

    @Test("a track is read once for the segments asked for at once, again once stored anew; a failed reading is not kept; the least recently used goes past the capacity")
    func trackCache() async throws {
        let cache = SubtitleTrackCache()
        let reads = ReadCounter()
        let text = "WEBVTT\n\n00:00.000 --> 00:01.000\nhello\n"
        func read(_ key: String, _ etag: String) async throws -> WebVTT {
            try await cache.track(key: key, etag: etag) {
                reads.add(key + "/" + etag)
                try await Task.sleep(for: .milliseconds(50))
                return try WebVTT(parsing: text)
            }
        }
        let tracks = try await withThrowingTaskGroup(of: WebVTT.self) { group in
            for _ in 0..<30 { group.addTask { try await read("a.vtt", "1") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(tracks.count == 30 && tracks.allSatisfy { $0.cues.count == 1 })
        #expect(reads.count("a.vtt/1") == 1)
        _ = try await read("a.vtt", "2")
        #expect(reads.count("a.vtt/2") == 1)
        await #expect(throws: WebVTT.Malformed.self) {
            _ = try await cache.track(key: "bad.vtt", etag: "1") {
                reads.add("bad.vtt/1")
                return try WebVTT(parsing: "not a track")
            }
        }
        await #expect(throws: WebVTT.Malformed.self) {
            _ = try await cache.track(key: "bad.vtt", etag: "1") {
                reads.add("bad.vtt/1")
                return try WebVTT(parsing: "not a track")
            }
        }
        #expect(reads.count("bad.vtt/1") == 2)
        // Past the capacity: "a.vtt" 2, used again now, stays; the least recently used ("a.vtt" 1) is read again.
        for index in 0..<(SubtitleTrackCache.capacity - 1) {
            _ = try await read("other-\(index).vtt", "1")
        }
        _ = try await read("a.vtt", "2")
        _ = try await read("last.vtt", "1")
        _ = try await read("a.vtt", "2")
        _ = try await read("a.vtt", "1")
        #expect(reads.count("a.vtt/2") == 1)
        #expect(reads.count("a.vtt/1") == 2)
    }

    @Test("the master playlist gains one SUBTITLES group that every variant names, each track by a name of its own; subtitle paths are read strictly")
    func playlists() {
        let master = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-STREAM-INF:BANDWIDTH=1,CODECS=\"avc1.64001f\"\nLD/index.m3u8\n#EXT-X-STREAM-INF:BANDWIDTH=2\nSD/index.m3u8\n"
        let tracks = [
            SubtitleTrack(subtitleId: "sta", language: "en", name: "English", isDefault: true, key: "k", cueCount: 1, createdAt: Date()),
            SubtitleTrack(subtitleId: "stb", language: "pt-BR", name: "Português", isDefault: false, key: "k", cueCount: 1, createdAt: Date()),
        ]
        let text = SubtitlePlaylists.master(master, tracks: tracks)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("#EXT-X-MEDIA:TYPE=SUBTITLES") }.count == 2)
        #expect(lines.contains("#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"English\",LANGUAGE=\"en\",DEFAULT=YES,AUTOSELECT=YES,FORCED=NO,URI=\"subtitles/sta.m3u8\""))
        #expect(lines.filter { $0.hasPrefix("#EXT-X-STREAM-INF:") }.allSatisfy { $0.hasSuffix(",SUBTITLES=\"subs\"") })
        #expect(SubtitlePlaylists.master(master, tracks: []) == master)
        // Tracks stored before AddSubtitle kept names apart may share one: the group's names still differ.
        let twins = tracks + [
            SubtitleTrack(subtitleId: "stc", language: "en", name: "English", isDefault: false, key: "k", cueCount: 1, createdAt: Date()),
        ]
        let named = SubtitlePlaylists.master(master, tracks: twins).split(separator: "\n")
            .filter { $0.hasPrefix("#EXT-X-MEDIA:TYPE=SUBTITLES") }
            .compactMap { $0.split(separator: "NAME=\"").last?.prefix { $0 != "\"" } }.map(String.init)
        #expect(named == ["English", "Português", "English (2)"])

        // The DASH manifest gains one text adaptation set per track, each naming the whole WebVTT file; a signed
        // video's token reaches its BaseURL as it does every segment.
        let manifest = DashManifest.make([
            .init(definition: "LD", bandwidth: 1, width: 2, height: 2, codecs: "avc1", fps: nil, segments: [(4, "seg_00000.m4s")])
        ])
        let dash = DashManifest.addingQuery("token=t&u", to: DashManifest.addingSubtitles(twins, to: manifest))
        #expect(dash.components(separatedBy: "contentType=\"text\" mimeType=\"text/vtt\"").count - 1 == 3)
        #expect(dash.contains("lang=\"pt-BR\">\n      <Label>Português</Label>"))
        #expect(dash.contains("<Label>English (2)</Label>") && dash.components(separatedBy: "value=\"main\"").count == 2)
        #expect(dash.contains("<BaseURL>subtitles/sta.vtt?token=t&amp;u</BaseURL>"))
        #expect(dash.contains("media=\"LD/seg_00000.m4s?token=t&amp;u\""))
        #expect(dash.hasSuffix("    </AdaptationSet>\n  </Period>\n</MPD>\n"))
        // A name is XML text: `]]>` is escaped, and what XML cannot carry (a track stored before it was refused) left out.
        let odd = SubtitleTrack(subtitleId: "std", language: "en", name: "Cut ]]> <b>\u{FFFF}", isDefault: false, key: "k", cueCount: 1, createdAt: Date())
        #expect(DashManifest.addingSubtitles([odd], to: manifest).contains("<Label>Cut ]]&gt; &lt;b&gt;</Label>"))
        #expect(DashManifest.addingSubtitles([], to: manifest) == manifest)

        #expect(SubtitlePlaylists.file("subtitles/sta.m3u8") == .playlist(subtitleId: "sta"))
        #expect(SubtitlePlaylists.file("subtitles/sta.vtt") == .track(subtitleId: "sta"))
        #expect(SubtitlePlaylists.file("subtitles/sta/12.vtt") == .segment(subtitleId: "sta", index: 12))
        for path in ["subtitles/sta/012.vtt", "subtitles/sta/-1.vtt", "subtitles/sta/x.vtt", "subtitles/a/b/c.vtt", "LD/index.m3u8", "subtitles/sta.srt"] {
            #expect(SubtitlePlaylists.file(path) == nil, "\(path)")
        }

        let media = SubtitlePlaylists.mediaPlaylist(subtitleId: "sta", duration: 9.5, segmentSeconds: 4)
        #expect(media.contains("#EXT-X-TARGETDURATION:4") && media.hasSuffix("#EXT-X-ENDLIST\n"))
        #expect(media.components(separatedBy: "#EXTINF:").count - 1 == 3)
        #expect(media.contains("#EXTINF:1.500,\nsta/2.vtt"))
    }

    @Test("language tags follow BCP 47's shape")
    func languageTags() {
        for tag in ["en", "pt-BR", "zh-Hans", "zh-Hans-CN", "es-419", "yue"] { #expect(MediaAPI.isLanguageTag(tag), "\(tag)") }
        for tag in ["", "e", "english", "en_US", "en-", "en--US", "en-abcdefghi", "\u{0645}\u{0635}"] {
            #expect(!MediaAPI.isLanguageTag(tag), "\(tag)")
        }
    }
}

@Suite("Subtitle tracks through the media API (SQLite and PostgreSQL)", .serialized, .timeLimit(.minutes(10)))
struct SubtitleCatalogTests {
    static let srt = "1\n00:00:00,500 --> 00:00:02,000\nHello\n"

    @Test("AddSubtitle, ListSubtitles and DeleteSubtitle keep a video's tracks, each with its own name; bad requests change nothing", arguments: QuotaBackend.allCases)
    func tracks(backend: QuotaBackend) async throws {
        try await backend.withNodes { servers in
            let server = servers[0]
            let root = Credentials(accessKeyId: server.root.accessKeyId, secretAccessKey: server.root.secretAccessKey)
            let media = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: root)
            let videoId = try await media.createUploadVideo(.init(title: "Captions", fileName: "c.mp4")).id

            let english = try await media.addSubtitle(videoId: videoId, language: "en", name: "English", isDefault: true, content: Self.srt)
            #expect(english.language == "en" && english.name == "English" && english.isDefault && english.cueCount == 1)
            let french = try await media.addSubtitle(videoId: videoId, language: "fr", isDefault: true, content: "WEBVTT\n\n00:01.000 --> 00:02.000\nBonjour\n")
            #expect(french.name == "fr")
            // Names tell tracks apart (HLS wants them to differ): one taken from the language is numbered, one asked
            // for that another track has is refused.
            let secondFrench = try await media.addSubtitle(videoId: videoId, language: "fr", content: Self.srt)
            #expect(secondFrench.name == "fr (2)" && !secondFrench.isDefault)
            do {
                _ = try await media.addSubtitle(videoId: videoId, language: "en", name: "English", content: Self.srt)
                Issue.record("a second track named English was added")
            } catch {
                #expect((error as? FerryError)?.serverCode == "InvalidParameter", "\(error)")
                #expect("\(error)".contains("Name"), "\(error)")
            }
            try await media.deleteSubtitle(videoId: videoId, subtitleId: secondFrench.subtitleId)
            // One default at a time: the newer default took it over.
            let listed = try await media.listSubtitles(videoId: videoId)
            #expect(listed.map(\.subtitleId) == [english.subtitleId, french.subtitleId])
            #expect(listed.map(\.isDefault) == [false, true])
            let stored = try await server.server.store.object(bucket: "ferry-media", key: "video/\(videoId)/subtitles/\(english.subtitleId).vtt")
            #expect(stored.size > 0)
            // Served with the stream they go with: not while the video is still uploading, even a public one.
            try await media.setPlaybackPolicy(.public, videoId: videoId)
            for file in ["\(english.subtitleId).m3u8", "\(english.subtitleId).vtt", "\(english.subtitleId)/0.vtt"] {
                let early = try await S3TestClient.fetch(server.endpoint + "/_ferry/play/\(videoId)/subtitles/" + file)
                #expect(early.status == 404, "\(file): \(early.status)")
            }

            func refusal(_ body: () async throws -> Void) async -> String? {
                do {
                    try await body()
                    return nil
                } catch {
                    return (error as? FerryError)?.serverCode ?? "\(error)"
                }
            }
            #expect(await refusal { _ = try await media.addSubtitle(videoId: videoId, language: "english", content: Self.srt) } == "InvalidParameter")
            #expect(await refusal { _ = try await media.addSubtitle(videoId: videoId, language: "en", content: "not a track") } == "InvalidParameter")
            #expect(await refusal { _ = try await media.addSubtitle(videoId: videoId, language: "en", name: "a \"quoted\" name", content: Self.srt) } == "InvalidParameter")
            // A name goes into the master playlist's quoted NAME: nothing that ends a line there, for any reader.
            // Nor what the DASH manifest's XML cannot carry.
            for name in ["a\nb", "a\u{2028}b", "a\u{2029}b", "a\u{85}b", "a\u{FFFE}b", "a\u{FFFF}b"] {
                #expect(await refusal { _ = try await media.addSubtitle(videoId: videoId, language: "en", name: name, content: Self.srt) } == "InvalidParameter", "\(name.unicodeScalars.map(\.value))")
            }
            #expect(await refusal { _ = try await media.addSubtitle(videoId: videoId, language: "en", content: "") } == "MissingParameter")
            #expect(await refusal { _ = try await media.addSubtitle(videoId: "no-such-video", language: "en", content: Self.srt) } != nil)
            #expect(await refusal { try await media.deleteSubtitle(videoId: videoId, subtitleId: "st0000") } != nil)
            #expect(try await media.listSubtitles(videoId: videoId).count == 2)

            // Another key's caller cannot touch the tracks.
            let other = try await media.createAccessKey(policy: AccessPolicy(statements: [.init(actions: ["media:*"])]))
            let stranger = MediaServiceClient(endpoint: URL(string: server.endpoint)!, credentials: other)
            #expect(await refusal { _ = try await stranger.listSubtitles(videoId: videoId) } == "Forbidden")
            #expect(await refusal { try await stranger.deleteSubtitle(videoId: videoId, subtitleId: english.subtitleId) } == "Forbidden")

            try await media.deleteSubtitle(videoId: videoId, subtitleId: english.subtitleId)
            #expect(try await media.listSubtitles(videoId: videoId).map(\.subtitleId) == [french.subtitleId])
            await #expect(throws: (any Error).self) {
                _ = try await server.server.store.object(bucket: "ferry-media", key: stored.key)
            }

            // Calls racing for the last slots: the ones past the limit are told so (400), not that the video is gone.
            let racingFills = try await withThrowingTaskGroup(of: String?.self) { group in
                for index in 0..<(MediaAPI.maxSubtitles + 8) {
                    group.addTask {
                        do {
                            _ = try await media.addSubtitle(videoId: videoId, language: "en", name: "t\(index)", content: Self.srt)
                            return nil
                        } catch {
                            return (error as? FerryError)?.serverCode ?? "\(error)"
                        }
                    }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(racingFills.filter { $0 == nil }.count == MediaAPI.maxSubtitles - 1)
            #expect(racingFills.compactMap { $0 }.allSatisfy { $0 == "InvalidParameter" }, "\(racingFills)")
            #expect(try await media.listSubtitles(videoId: videoId).count == MediaAPI.maxSubtitles)
        }
    }
}

@Suite("Subtitle tracks in the HLS stream, read by ffprobe and the m3u8 package", .timeLimit(.minutes(10)))
struct SubtitlePlaybackTests {
    @Test("a processed video's master playlist lists its tracks; ffprobe reads a track's playlist as a subtitle stream; m3u8 parses every playlist")
    func playback() async throws {
        try await MediaHarness.with { harness in
            let videoId = try await harness.upload(try await harness.fixture(.landscape480, seconds: 10))
            #expect(try await harness.waitFor(videoId, ["Normal", "TranscodeFail"], timeout: .seconds(300)).status == "Normal")
            let srt = "1\n00:00:00,500 --> 00:00:03,000\nFirst words\n\n2\n00:00:05,000 --> 00:00:06,000\nSecond words\n"
            let track = try await harness.media.addSubtitle(videoId: videoId, language: "en", name: "English", isDefault: true, content: srt)
            let play = try await harness.media.getPlayInfo(videoId: videoId, formats: ["m3u8"])
            let master = try #require(play.streams.first { $0.definition == "AUTO" }?.url)
            let client = HTTPGetter()
            // Files beside the master, with its query (the token of a signed video).
            func beside(_ path: String) -> String { master.replacingOccurrences(of: "master.m3u8", with: path) }

            let masterText = try await client.text(master)
            // Made on serve, with the token in every URI, and still cached by its ETag.
            let etag = try #require(try await client.etag(master))
            #expect(try await client.status(master, headers: ["If-None-Match: \(etag)"]) == 304)
            let variantURL = beside("LD/index.m3u8")
            let variantTag = try #require(try await client.etag(variantURL))
            #expect(try await client.status(variantURL, headers: ["If-None-Match: \(variantTag)"]) == 304)
            #expect(try await client.text(variantURL).contains(".m4s?token="))
            #expect(masterText.contains("#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID=\"subs\",NAME=\"English\",LANGUAGE=\"en\",DEFAULT=YES"))
            let media = try await client.text(beside("subtitles/\(track.subtitleId).m3u8"))
            #expect(media.contains("#EXT-X-ENDLIST"))
            let second = try await client.text(beside("subtitles/\(track.subtitleId)/1.vtt"))
            #expect(second.contains("Second words") && !second.contains("First words"))
            let whole = try await client.text(beside("subtitles/\(track.subtitleId).vtt"))
            #expect(whole.hasPrefix("WEBVTT") && whole.contains("00:00:00.500 --> 00:00:03.000"))
            #expect(try await client.status(beside("subtitles/\(track.subtitleId)/99.vtt")) == 404)
            #expect(try await client.status(beside("subtitles/st0000000000000000.m3u8")) == 404)

            // ffprobe reads the track's HLS playlist as a WebVTT subtitle stream, and ffmpeg takes every cue from its
            // segments at its time. (Debian's ffmpeg 5.1 skips a master playlist's subtitle renditions, "Can't
            // support the subtitle", so the track's own playlist is what it is given.)
            let trackPlaylist = beside("subtitles/\(track.subtitleId).m3u8")
            let probed = try await MediaFixtures.probe(trackPlaylist)
            #expect(probed.codec("subtitle") == "webvtt")
            let cues = harness.fixtures + "/cues.vtt"
            try await MediaFixtures.ffmpeg(["-i", trackPlaylist, "-f", "webvtt", cues])
            let extracted = try String(contentsOfFile: cues, encoding: .utf8)
            #expect(extracted.contains("00:00.500 --> 00:03.000\nFirst words\n\n00:05.000 --> 00:06.000\nSecond words"), "\(extracted)")
            #expect(try await MediaFixtures.probe(master).codec("video") == "h264")

            // The DASH manifest names the track too: Python's XML reader finds its text adaptation set, whose
            // BaseURL (with the token) is the whole track; ffmpeg still reads the manifest's picture.
            let manifestURL = beside("manifest.mpd")
            let dashScript = """
                import json, sys, urllib.parse, urllib.request, xml.etree.ElementTree as ET
                ns = {"d": "urn:mpeg:dash:schema:mpd:2011"}
                root = ET.fromstring(urllib.request.urlopen(sys.argv[1]).read())
                texts = [a for a in root.iter("{urn:mpeg:dash:schema:mpd:2011}AdaptationSet") if a.get("contentType") == "text"]
                base = texts[0].find("d:Representation/d:BaseURL", ns).text
                body = urllib.request.urlopen(urllib.parse.urljoin(sys.argv[1], base)).read().decode()
                print(json.dumps({"texts": len(texts), "lang": texts[0].get("lang"), "label": texts[0].find("d:Label", ns).text,
                    "roles": [r.get("value") for r in texts[0].findall("d:Role", ns)], "base": base, "body": body}))
                """
            let dashRun = try await MediaFixtures.tool("python3", ["-c", dashScript, manifestURL])
            #expect(dashRun.status == 0, "\(dashRun.errorOutput)")
            let dash = try #require(try JSONSerialization.jsonObject(with: Data(dashRun.output.utf8)) as? [String: Any])
            #expect(dash["texts"] as? Int == 1 && dash["lang"] as? String == "en" && dash["label"] as? String == "English")
            #expect(dash["roles"] as? [String] == ["subtitle", "main"])
            #expect((dash["base"] as? String)?.hasPrefix("subtitles/\(track.subtitleId).vtt?token=") == true, "\(dash)")
            #expect((dash["body"] as? String)?.contains("00:00:05.000 --> 00:00:06.000\nSecond words") == true)
            #expect(try await MediaFixtures.probe(manifestURL).codec("video") == "h264")

            // The m3u8 package (PyPI), a reader no one here wrote, parses the master, a variant, the audio rendition and the
            // track.
            let script = """
                import json, sys, m3u8
                master = m3u8.load(sys.argv[1])
                subs = [m for m in master.media if m.type == "SUBTITLES"]
                track = m3u8.load(master.base_uri + subs[0].uri)
                variant = m3u8.load(master.base_uri + master.playlists[0].uri)
                audio = [m for m in master.media if m.type == "AUDIO"]
                sound = m3u8.load(master.base_uri + audio[0].uri)
                print(json.dumps({
                    "audioGroups": sorted({p.stream_info.audio for p in master.playlists}),
                    "audioSegments": len(sound.segments), "audioMap": sound.segment_map[0].uri if sound.segment_map else None,
                    "variants": len(master.playlists),
                    "groups": sorted({p.stream_info.subtitles for p in master.playlists}),
                    "language": subs[0].language, "default": subs[0].default,
                    "trackSegments": len(track.segments), "trackDuration": sum(s.duration for s in track.segments),
                    "variantSegments": len(variant.segments), "variantDuration": sum(s.duration for s in variant.segments),
                }))
                """
            let run = try await MediaFixtures.tool("python3", ["-c", script, master])
            #expect(run.status == 0, "\(run.errorOutput)")
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
            #expect(parsed["groups"] as? [String] == ["subs"])
            // The sound is the master's AUDIO group, an fMP4 rendition of its own.
            #expect(parsed["audioGroups"] as? [String] == ["audio"])
            #expect((parsed["audioSegments"] as? Int ?? 0) >= 3 && (parsed["audioMap"] as? String)?.hasPrefix("init.mp4") == true)
            #expect(parsed["language"] as? String == "en" && parsed["default"] as? String == "YES")
            #expect((parsed["trackSegments"] as? Int ?? 0) >= 3)
            let trackDuration = try #require(parsed["trackDuration"] as? Double)
            let variantDuration = try #require(parsed["variantDuration"] as? Double)
            #expect(abs(trackDuration - variantDuration) < 0.5, "subtitle segments cover the video: \(trackDuration) vs \(variantDuration)")

            // Deleting the track takes it out of the master playlist.
            try await harness.media.deleteSubtitle(videoId: videoId, subtitleId: track.subtitleId)
            #expect(!(try await client.text(master)).contains("TYPE=SUBTITLES"))
            #expect(!(try await client.text(manifestURL)).contains("contentType=\"text\""))
            #expect(try await client.status(beside("subtitles/\(track.subtitleId).m3u8")) == 404)
        }
    }
}

/// Plain GETs of playback URLs (no credential: the URL carries it).
private struct HTTPGetter {
    func text(_ url: String) async throws -> String {
        let (status, data) = try await get(url)
        guard status == 200 else { throw GetFailed(url: url, status: status) }
        return String(decoding: data, as: UTF8.self)
    }

    func status(_ url: String, headers: [String] = []) async throws -> Int {
        let run = try await MediaFixtures.tool("curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code}"] + headers.flatMap { ["-H", $0] } + [url])
        guard run.status == 0, let status = Int(run.output) else { throw GetFailed(url: url, status: -1) }
        return status
    }

    /// The ETag a HEAD answers.
    func etag(_ url: String) async throws -> String? {
        let run = try await MediaFixtures.tool("curl", ["-sS", "-I", url])
        return run.output.split(whereSeparator: \.isNewline).first { $0.lowercased().hasPrefix("etag:") }
            .map { $0.dropFirst(5).trimmingCharacters(in: .whitespaces) }
    }

    private func get(_ url: String) async throws -> (Int, Data) {
        let run = try await MediaFixtures.tool("curl", ["-sS", "-o", "-", "-w", "\n%{http_code}", url])
        guard run.status == 0, let cut = run.output.lastIndex(of: "\n"), let status = Int(run.output[run.output.index(after: cut)...])
        else { throw GetFailed(url: url, status: -1) }
        return (status, Data(run.output[..<cut].utf8))
    }

    struct GetFailed: Error { var url: String; var status: Int }
}

/// Counts readings by name, from any task.
private final class ReadCounter: Sendable {
    private let counts = NIOLockedValueBox([String: Int]())
    func add(_ name: String) { counts.withLockedValue { $0[name, default: 0] += 1 } }
    func count(_ name: String) -> Int { counts.withLockedValue { $0[name, default: 0] } }
}
