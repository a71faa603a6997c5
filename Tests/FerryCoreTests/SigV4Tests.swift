import Foundation
import Testing

@testable import FerryCore

/// The example credentials and time of the AWS S3 SigV4 documentation
/// ("Signature Calculations for the Authorization Header" and "Authenticating Requests: Using Query Parameters").
enum SigV4DocExample {
    static let credentials = SigV4Credentials(
        accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    /// Fri, 24 May 2013 00:00:00 GMT
    static let date = Date(timeIntervalSince1970: 1_369_353_600)
    static let host = "examplebucket.s3.amazonaws.com"
    static let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
    static let scope = SigV4Scope(date: "20130524", region: "us-east-1", service: "s3")

    static func stringToSign(_ canonicalRequestHash: String) -> String {
        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n\(canonicalRequestHash)"
    }
}

@Suite("SigV4 — AWS S3 documentation examples", .timeLimit(.minutes(10)))
struct SigV4S3ExampleTests {
    @Test("GET Object with a Range header")
    func getObject() throws {
        let signed = SigV4DocExample.signer.sign(
            method: "GET", path: "/test.txt", query: [],
            headers: [("Host", SigV4DocExample.host), ("Range", "bytes=0-9")],
            payloadHash: SigV4.emptyPayloadHash, date: SigV4DocExample.date)
        #expect(
            signed.canonicalRequest == """
                GET
                /test.txt

                host:examplebucket.s3.amazonaws.com
                range:bytes=0-9
                x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                x-amz-date:20130524T000000Z

                host;range;x-amz-content-sha256;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """)
        #expect(
            signed.stringToSign
                == SigV4DocExample.stringToSign("7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"))
        #expect(signed.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        let authorization =
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        #expect(signed.authorization == authorization)
        // The returned header list is the caller's plus x-amz-date, x-amz-content-sha256, Authorization.
        let names = signed.headers.map { $0.name.lowercased() }
        #expect(names == ["host", "range", "x-amz-date", "x-amz-content-sha256", "authorization"])
        #expect(signed.headers.last?.value == authorization)
        #expect(
            SigV4DocExample.signer.sign(
                method: "GET", path: "/test.txt", query: [],
                headers: [("Host", SigV4DocExample.host), ("Range", "bytes=0-9")],
                payloadHash: SigV4.emptyPayloadHash, date: SigV4DocExample.date
            ).headers.last?.value == authorization)
    }

    @Test("PUT Object with x-amz-storage-class and a Date header")
    func putObject() throws {
        let payload = Array("Welcome to Amazon S3.".utf8)
        let payloadHash = SigV4.hexSHA256(payload)
        #expect(payloadHash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let path = SigV4.uriEncode("/test$file.text", encodeSlash: false)
        #expect(path == "/test%24file.text")
        let signed = SigV4DocExample.signer.sign(
            method: "PUT", path: path, query: [],
            headers: [
                ("Host", SigV4DocExample.host), ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ],
            payloadHash: payloadHash, date: SigV4DocExample.date)
        #expect(
            signed.canonicalRequest == """
                PUT
                /test%24file.text

                date:Fri, 24 May 2013 00:00:00 GMT
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072
                x-amz-date:20130524T000000Z
                x-amz-storage-class:REDUCED_REDUNDANCY

                date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class
                44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072
                """)
        #expect(
            signed.stringToSign
                == SigV4DocExample.stringToSign("9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d"))
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        )
    }

    @Test("GET Bucket lifecycle (a query parameter without a value)")
    func getBucketLifecycle() throws {
        let signed = SigV4DocExample.signer.sign(
            method: "GET", path: "/", query: [("lifecycle", "")], headers: [("Host", SigV4DocExample.host)],
            payloadHash: SigV4.emptyPayloadHash, date: SigV4DocExample.date)
        #expect(
            signed.canonicalRequest == """
                GET
                /
                lifecycle=
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                x-amz-date:20130524T000000Z

                host;x-amz-content-sha256;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """)
        #expect(
            signed.stringToSign
                == SigV4DocExample.stringToSign("9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca"))
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
        )
    }

    @Test("GET Bucket (List Objects): query parameters given out of order are sorted")
    func listObjects() throws {
        let signed = SigV4DocExample.signer.sign(
            method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")],
            headers: [("Host", SigV4DocExample.host)],
            payloadHash: SigV4.emptyPayloadHash, date: SigV4DocExample.date)
        #expect(
            signed.canonicalRequest.split(separator: "\n", omittingEmptySubsequences: false)[2] == "max-keys=2&prefix=J"
        )
        #expect(
            signed.stringToSign
                == SigV4DocExample.stringToSign("df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7"))
        #expect(signed.signature == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    @Test("Presigned GET URL, X-Amz-Expires=86400")
    func presignedURL() throws {
        let items = try SigV4DocExample.signer.presign(
            method: "GET", path: "/test.txt", query: [], host: SigV4DocExample.host, expires: 86400,
            date: SigV4DocExample.date)
        let query = items.map {
            "\(SigV4.uriEncode($0.name, encodeSlash: true))=\(SigV4.uriEncode($0.value, encodeSlash: true))"
        }
        .joined(separator: "&")
        #expect(
            query
                == "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        )

        // The documented canonical request and its hash.
        let canonical = SigV4.canonicalRequest(
            method: "GET", canonicalURI: "/test.txt", query: items.filter { $0.name != "X-Amz-Signature" },
            headers: [("host", SigV4DocExample.host)], signedHeaders: ["host"], payloadHash: SigV4.unsignedPayload)
        #expect(
            canonical == """
                GET
                /test.txt
                X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host
                host:examplebucket.s3.amazonaws.com

                host
                UNSIGNED-PAYLOAD
                """)
        #expect(SigV4.hexSHA256(canonical) == "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04")
    }

    @Test("Presigning rejects expiries outside 1...604800 seconds")
    func presignExpiryRange() throws {
        for expires in [0, -5, 604_801] {
            let error = #expect(throws: SigV4Error.self) {
                _ = try SigV4DocExample.signer.presign(
                    method: "GET", path: "/test.txt", query: [], host: SigV4DocExample.host,
                    expires: expires, date: SigV4DocExample.date)
            }
            #expect(error?.code == .invalidExpires)
        }
        let longest = try SigV4DocExample.signer.presign(
            method: "GET", path: "/a", query: [], host: SigV4DocExample.host,
            expires: 604_800, date: SigV4DocExample.date)
        #expect(longest.contains { $0.name == "X-Amz-Expires" && $0.value == "604800" })
    }
}

/// One case of the AWS SigV4 test suite (awslabs aws-c-auth `aws-signing-test-suite/v4`):
/// region us-east-1, service "service", 2015-08-30T12:36:00Z.
struct SigV4SuiteVector: Sendable, CustomTestStringConvertible {
    var name: String
    var method: String
    var path: String
    var query: [Pair]
    var headers: [Pair]
    var token: String? = nil
    var canonical: String
    var stringToSignHash: String
    var signature: String

    struct Pair: Sendable {
        var name: String
        var value: String
        init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    var testDescription: String { name }

    static let emptyHash = SigV4.emptyPayloadHash
    static let all: [SigV4SuiteVector] = [
        SigV4SuiteVector(
            name: "get-vanilla", method: "GET", path: "/", query: [], headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
            signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        SigV4SuiteVector(
            name: "get-vanilla-with-session-token", method: "GET", path: "/", query: [],
            headers: [Pair("Host", "example.amazonaws.com")],
            token: "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267",
            canonical:
                "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\nx-amz-security-token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n\nhost;x-amz-date;x-amz-security-token\n\(emptyHash)",
            stringToSignHash: "067b36aa60031588cea4a4cde1f21215227a047690c72247f1d70b32fbbfad2b",
            signature: "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"),
        SigV4SuiteVector(
            name: "get-header-value-trim (spaces collapsed)", method: "GET", path: "/", query: [],
            headers: [
                Pair("Host", "example.amazonaws.com"), Pair("My-Header1", " value1"),
                Pair("My-Header2", " \"a   b   c\""),
            ],
            canonical:
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n\(emptyHash)",
            stringToSignHash: "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
            signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
        SigV4SuiteVector(
            name: "get-header-key-duplicate", method: "GET", path: "/", query: [],
            headers: [
                Pair("Host", "example.amazonaws.com"), Pair("My-Header1", "value2"), Pair("My-Header1", "value2"),
                Pair("My-Header1", "value1"),
            ],
            canonical:
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value2,value2,value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
            stringToSignHash: "dc7f04a3abfde8d472b0ab1a418b741b7c67174dad1551b4117b15527fbe966c",
            signature: "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"),
        SigV4SuiteVector(
            name: "get-header-value-order", method: "GET", path: "/", query: [],
            headers: [
                Pair("Host", "example.amazonaws.com"), Pair("My-Header1", "value4"), Pair("My-Header1", "value1"),
                Pair("My-Header1", "value3"), Pair("My-Header1", "value2"),
            ],
            canonical:
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value4,value1,value3,value2\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
            stringToSignHash: "31ce73cd3f3d9f66977ad3dd957dc47af14df92fcd8509f59b349e9137c58b86",
            signature: "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"),
        SigV4SuiteVector(
            name: "post-header-key-sort", method: "POST", path: "/", query: [],
            headers: [Pair("Host", "example.amazonaws.com"), Pair("My-Header1", "value1")],
            canonical:
                "POST\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nx-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
            stringToSignHash: "9368318c2967cf6de74404b30c65a91e8f6253e0a8659d6d5319f1a812f87d65",
            signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
        SigV4SuiteVector(
            name: "get-vanilla-query-order-key-case (unsorted query)", method: "GET", path: "/",
            query: [Pair("Param2", "value2"), Pair("Param1", "value1")],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
            signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        SigV4SuiteVector(
            name: "get-vanilla-query-unreserved", method: "GET", path: "/",
            query: [
                Pair(
                    "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
                    "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
            ],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/\n-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "c30d4703d9f799439be92736156d47ccfb2d879ddf56f5befa6d1d6aab979177",
            signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
        SigV4SuiteVector(
            name: "get-vanilla-utf8-query", method: "GET", path: "/", query: [Pair("ሴ", "bar")],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/\n%E1%88%B4=bar\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "eb30c5bed55734080471a834cc727ae56beb50e5f39d1bff6d0d38cb192a7073",
            signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
        SigV4SuiteVector(
            name: "get-utf8 (encoded path)", method: "GET", path: "/ሴ", query: [],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
            signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
        SigV4SuiteVector(
            name: "get-space (encoded path)", method: "GET", path: "/example space/", query: [],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/example%20space/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
            signature: "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
        SigV4SuiteVector(
            name: "get-unreserved", method: "GET",
            path: "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", query: [],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "GET\n/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9",
            signature: "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
        SigV4SuiteVector(
            name: "post-vanilla-query", method: "POST", path: "/", query: [Pair("Param1", "value1")],
            headers: [Pair("Host", "example.amazonaws.com")],
            canonical:
                "POST\n/\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "9d659678c1756bb3113e2ce898845a0a79dbbc57b740555917687f1b3340fbbd",
            signature: "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
    ]
}

@Suite("SigV4 — AWS test suite canonicalization", .timeLimit(.minutes(10)))
struct SigV4SuiteTests {
    @Test(arguments: SigV4SuiteVector.all)
    func vector(_ v: SigV4SuiteVector) throws {
        let signer = SigV4Signer(
            credentials: SigV4Credentials(
                accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                sessionToken: v.token),
            region: "us-east-1", service: "service")
        let date = try #require(SigV4.parseTimestamp("20150830T123600Z"))
        let signed = signer.sign(
            method: v.method, path: SigV4.uriEncode(v.path, encodeSlash: false),
            query: v.query.map { ($0.name, $0.value) }, headers: v.headers.map { ($0.name, $0.value) },
            payloadHash: SigV4.emptyPayloadHash, date: date)
        #expect(signed.canonicalRequest == v.canonical)
        #expect(
            signed.stringToSign
                == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n\(v.stringToSignHash)")
        #expect(signed.signature == v.signature)
        // Not S3: no x-amz-content-sha256 is added.
        #expect(!signed.headers.contains { $0.name.lowercased() == "x-amz-content-sha256" })
    }

    @Test("Signing key derivation (AWS example: 20120215/us-east-1/iam)")
    func signingKey() {
        let key = SigV4.signingKey(
            secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            scope: SigV4Scope(date: "20120215", region: "us-east-1", service: "iam"))
        #expect(
            key.withUnsafeBytes { Hex.encode($0) } == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d")
    }
}

@Suite("SigV4 — building blocks", .timeLimit(.minutes(10)))
struct SigV4BuildingBlockTests {
    @Test func uriEncode() {
        #expect(SigV4.uriEncode("a b/c~d$", encodeSlash: false) == "a%20b/c~d%24")
        #expect(SigV4.uriEncode("a/b", encodeSlash: true) == "a%2Fb")
        #expect(SigV4.uriEncode("é", encodeSlash: true) == "%C3%A9")
        #expect(SigV4.uriEncode("!'()*+=&:,;@", encodeSlash: true) == "%21%27%28%29%2A%2B%3D%26%3A%2C%3B%40")
        #expect(SigV4.uriEncode("-._~AZaz09", encodeSlash: true) == "-._~AZaz09")
        #expect(SigV4.uriEncode("%", encodeSlash: true) == "%25")
        #expect(SigV4.uriEncode("", encodeSlash: true) == "")
    }

    @Test func percentDecodeAndQueryParsing() {
        #expect(SigV4.percentDecode("a%20b%2fc%2B+") == "a b/c++")
        #expect(SigV4.percentDecode("100%") == "100%")
        #expect(SigV4.percentDecode("%zz%4") == "%zz%4")
        let items = SigV4.parseQueryString("prefix=J&max-keys=2&uploads&empty=&k%20ey=v%2Fal=ue&&")
        #expect(items.map { $0.name } == ["prefix", "max-keys", "uploads", "empty", "k ey"])
        #expect(items.map { $0.value } == ["J", "2", "", "", "v/al=ue"])
    }

    @Test("Server-side canonical URI from the raw wire path")
    func canonicalURIFromRawPath() {
        #expect(SigV4.canonicalURI(fromRawPath: "/test%24file.text") == "/test%24file.text")
        #expect(SigV4.canonicalURI(fromRawPath: "/test$file.text") == "/test%24file.text")
        #expect(SigV4.canonicalURI(fromRawPath: "/ex%61mple/a%2fb/") == "/example/a%2Fb/")
        #expect(SigV4.canonicalURI(fromRawPath: "/%E1%88%B4") == "/%E1%88%B4")
        #expect(SigV4.canonicalURI(fromRawPath: "/a//b") == "/a//b")
        #expect(SigV4.canonicalURI(fromRawPath: "") == "/")
    }

    @Test func canonicalQueryString() {
        #expect(SigV4.canonicalQueryString([]) == "")
        #expect(
            SigV4.canonicalQueryString([("b", "2"), ("a", "z"), ("a", "y"), ("a b", "c/d")])
                == "a=y&a=z&a%20b=c%2Fd&b=2")
        // Sorting is by encoded bytes: uppercase before lowercase.
        #expect(SigV4.canonicalQueryString([("b", ""), ("B", ""), ("_", "")]) == "B=&_=&b=")
    }

    @Test func canonicalHeaderValue() {
        #expect(SigV4.canonicalHeaderValue("  a \t  b   c  ") == "a b c")
        #expect(SigV4.canonicalHeaderValue("") == "")
        #expect(SigV4.canonicalHeaderValue("   ") == "")
    }

    @Test func timestamps() throws {
        #expect(SigV4.timestamp(SigV4DocExample.date) == "20130524T000000Z")
        #expect(SigV4.timestamp(Date(timeIntervalSince1970: 1_440_938_160.9)) == "20150830T123600Z")
        #expect(SigV4.timestamp(Date(timeIntervalSince1970: -1)) == "19691231T235959Z")
        #expect(SigV4.parseTimestamp("20130524T000000Z") == SigV4DocExample.date)
        #expect(SigV4.parseTimestamp("19691231T235959Z") == Date(timeIntervalSince1970: -1))
        let leap = try #require(SigV4.parseTimestamp("20240229T235959Z"))
        #expect(SigV4.timestamp(leap) == "20240229T235959Z")
        for bad in [
            "20130524T000000", "20131324T000000Z", "20230229T000000Z", "20130524T240000Z", "2013-05-24T00:00:00Z",
            "20130524t000000Z", "2013052AT000000Z", "",
        ] {
            #expect(SigV4.parseTimestamp(bad) == nil, "\(bad)")
        }
        // Every second of a few days around year boundaries round-trips.
        for base in [946_684_800.0, 1_704_067_200.0, 4_102_444_800.0] {
            for offset in stride(from: -86_400.0, to: 86_400.0, by: 997) {
                let date = Date(timeIntervalSince1970: base + offset)
                #expect(SigV4.parseTimestamp(SigV4.timestamp(date)) == date)
            }
        }
    }

    @Test func scope() {
        let scope = SigV4Scope(parsing: "20130524/us-east-1/s3/aws4_request")
        #expect(scope == SigV4DocExample.scope)
        #expect(scope?.string == "20130524/us-east-1/s3/aws4_request")
        for bad in [
            "20130524/us-east-1/s3", "20130524/us-east-1/s3/aws4", "2013052/us-east-1/s3/aws4_request",
            "20130524//s3/aws4_request", "20130524/us-east-1/s3/aws4_request/x",
        ] {
            #expect(SigV4Scope(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func hashingAndComparison() {
        #expect(SigV4.hexSHA256("") == SigV4.emptyPayloadHash)
        #expect(SigV4.hexSHA256([UInt8]()) == SigV4.emptyPayloadHash)
        #expect(
            SigV4.hexSHA256(AnySequence(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SigV4.constantTimeEquals("abc", "abc"))
        #expect(!SigV4.constantTimeEquals("abc", "abd"))
        #expect(!SigV4.constantTimeEquals("abc", "abcd"))
        #expect(SigV4.constantTimeEquals("", ""))
    }

    @Test("Credentials never print the secret or the session token")
    func credentialsRedaction() {
        let credentials = SigV4Credentials(
            accessKeyId: "AKIDPUBLIC", secretAccessKey: "SECRETsecretSECRET", sessionToken: "TOKENtokenTOKEN")
        var dumped = ""
        dump(credentials, to: &dumped)
        for text in [
            credentials.description, credentials.debugDescription, "\(credentials)", String(reflecting: credentials),
            "\([credentials])", dumped,
        ] {
            #expect(text.contains("AKIDPUBLIC"))
            #expect(!text.contains("SECRETsecretSECRET"))
            #expect(!text.contains("TOKENtokenTOKEN"))
        }
    }
}

@Suite("SigV4 — Authorization parsing and server verification", .timeLimit(.minutes(10)))
struct SigV4VerificationTests {
    static let getObjectAuthorization =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    static let getObjectHeaders: [(name: String, value: String)] = [
        ("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
        ("x-amz-content-sha256", SigV4.emptyPayloadHash), ("x-amz-date", "20130524T000000Z"),
        ("User-Agent", "not signed"), ("Authorization", getObjectAuthorization),
    ]

    @Test func parsesTheDocumentedHeader() throws {
        let auth = try SigV4Authorization(parsing: Self.getObjectAuthorization)
        #expect(auth.accessKeyId == "AKIAIOSFODNN7EXAMPLE")
        #expect(auth.scope == SigV4DocExample.scope)
        #expect(auth.signedHeaders == ["host", "range", "x-amz-content-sha256", "x-amz-date"])
        #expect(auth.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(auth.headerValue == Self.getObjectAuthorization.replacingOccurrences(of: ", ", with: ","))
    }

    @Test func parsingToleratesOrderAndSpacing() throws {
        let reordered = try SigV4Authorization(
            parsing:
                "AWS4-HMAC-SHA256  Signature=F0E8BDB87C964420E857BD35B5D6ED310BD44F0170ABA48DD91039C6036BDB41 ,SignedHeaders=host;x-amz-date,Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
        )
        #expect(reordered.signature == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(reordered.signedHeaders == ["host", "x-amz-date"])
        #expect(reordered.accessKeyId == "AKIAIOSFODNN7EXAMPLE")
    }

    @Test(arguments: [
        "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=",
        "AWS4-HMAC-SHA256Credential=A/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws4_request,SignedHeaders=host",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws4_request,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 SignedHeaders=host,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3,SignedHeaders=host,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=f0e8",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;;x,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws4_request,Credential=A/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41,Extra=1",
    ])
    func rejectsMalformedHeaders(_ header: String) {
        let error = #expect(throws: SigV4Error.self) {
            _ = try SigV4Authorization(parsing: header)
        }
        #expect(error?.code == .malformedAuthorization)
        #expect(error?.message.contains("f0e8bdb87c96") == false)
    }

    @Test func verifiesTheDocumentedGetObject() throws {
        let auth = try SigV4Authorization(parsing: Self.getObjectAuthorization)
        let verified = try SigV4Verifier.verify(
            authorization: auth, secretAccessKey: SigV4DocExample.credentials.secretAccessKey, method: "GET",
            canonicalURI: SigV4.canonicalURI(fromRawPath: "/test.txt"), query: [], headers: Self.getObjectHeaders,
            now: SigV4DocExample.date.addingTimeInterval(60), expectedRegion: "us-east-1")
        #expect(verified.accessKeyId == "AKIAIOSFODNN7EXAMPLE")
        #expect(verified.payloadHash == SigV4.emptyPayloadHash)
        #expect(verified.signature == auth.signature)
        #expect(verified.chunkedDecoderMode == nil)
    }

    @Test func verificationFailures() throws {
        let auth = try SigV4Authorization(parsing: Self.getObjectAuthorization)
        func verify(
            secret: String = SigV4DocExample.credentials.secretAccessKey, method: String = "GET",
            path: String = "/test.txt",
            query: [(name: String, value: String)] = [],
            headers: [(name: String, value: String)] = Self.getObjectHeaders,
            authorization: SigV4Authorization? = nil, now: Date? = SigV4DocExample.date,
            region: String? = nil
        ) throws {
            _ = try SigV4Verifier.verify(
                authorization: authorization ?? auth, secretAccessKey: secret, method: method,
                canonicalURI: SigV4.canonicalURI(fromRawPath: path), query: query, headers: headers, now: now,
                expectedRegion: region)
        }
        func code(_ body: () throws -> Void) -> SigV4Error.Code? {
            do {
                try body()
                return nil
            } catch let error as SigV4Error {
                #expect(!error.message.contains("f0e8bdb87c96"))
                #expect(!error.message.contains("wJalrXUtnFEMI"))
                return error.code
            } catch { return nil }
        }
        #expect(code { try verify() } == nil)
        #expect(code { try verify(secret: "wrong") } == .signatureDoesNotMatch)
        #expect(code { try verify(method: "HEAD") } == .signatureDoesNotMatch)
        #expect(code { try verify(path: "/test.txt2") } == .signatureDoesNotMatch)
        #expect(code { try verify(query: [("x", "1")]) } == .signatureDoesNotMatch)
        var changedRange = Self.getObjectHeaders
        changedRange[1].value = "bytes=0-10"
        #expect(code { try verify(headers: changedRange) } == .signatureDoesNotMatch)
        // Unsigned headers may change freely.
        var changedAgent = Self.getObjectHeaders
        changedAgent[4].value = "another agent"
        #expect(code { try verify(headers: changedAgent) } == nil)
        #expect(
            code { try verify(headers: Self.getObjectHeaders.filter { $0.name != "Range" }) } == .malformedAuthorization
        )
        #expect(code { try verify(now: SigV4DocExample.date.addingTimeInterval(16 * 60)) } == .requestTimeTooSkewed)
        #expect(code { try verify(now: SigV4DocExample.date.addingTimeInterval(-16 * 60)) } == .requestTimeTooSkewed)
        #expect(code { try verify(now: nil) } == nil)
        #expect(code { try verify(region: "eu-west-1") } == .malformedAuthorization)
        var noHost = auth
        noHost.signedHeaders = ["range", "x-amz-content-sha256", "x-amz-date"]
        #expect(code { try verify(authorization: noHost) } == .malformedAuthorization)
        var otherDay = auth
        otherDay.scope.date = "20130525"
        #expect(code { try verify(authorization: otherDay) } == .malformedAuthorization)
    }

    @Test("Sign then verify round trip with a session token and server-style raw inputs")
    func signVerifyRoundTrip() throws {
        let credentials = SigV4Credentials(
            accessKeyId: "AKIDTEST", secretAccessKey: "s3cr3t/+key", sessionToken: "tok/en+==")
        let signer = SigV4Signer(credentials: credentials, region: "ferry-local")
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let key = "photos/2024 summer/été+1.jpg"
        let path = "/bucket/" + SigV4.uriEncode(key, encodeSlash: false)
        let query: [(name: String, value: String)] = [("uploadId", "a/b+c"), ("partNumber", "7")]
        let headers = signer.sign(
            method: "PUT", path: path, query: query,
            headers: [("Host", "127.0.0.1:9000"), ("Content-Length", "5"), ("User-Agent", "ferry/1")],
            payloadHash: SigV4.unsignedPayload, date: date).headers
        #expect(headers.contains { $0.name == "x-amz-security-token" && $0.value == "tok/en+==" })
        let authorization = try #require(headers.first { $0.name == "Authorization" }?.value)
        #expect(
            authorization.contains(
                "SignedHeaders=content-length;host;x-amz-content-sha256;x-amz-date;x-amz-security-token,"))

        // The server sees the raw path and raw query string.
        let rawQuery = query.map {
            "\(SigV4.uriEncode($0.name, encodeSlash: true))=\(SigV4.uriEncode($0.value, encodeSlash: true))"
        }
        .joined(separator: "&")
        let auth = try SigV4Authorization(parsing: authorization)
        let verified = try SigV4Verifier.verify(
            authorization: auth, secretAccessKey: credentials.secretAccessKey, method: "PUT",
            canonicalURI: SigV4.canonicalURI(fromRawPath: path), query: SigV4.parseQueryString(rawQuery),
            headers: headers, now: date, expectedRegion: "ferry-local")
        #expect(verified.securityToken == "tok/en+==")
        #expect(verified.payloadHash == SigV4.unsignedPayload)
    }

    @Test("Presigned URL verification: the documented URL, expiry and tampering")
    func presignedVerification() throws {
        let rawQuery =
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        let query = SigV4.parseQueryString(rawQuery)
        #expect(SigV4PresignedQuery.isPresigned(query))
        #expect(!SigV4PresignedQuery.isPresigned([("uploads", "")]))
        let presigned = try SigV4PresignedQuery(parsing: query)
        #expect(presigned.accessKeyId == "AKIAIOSFODNN7EXAMPLE")
        #expect(presigned.expires == 86400)
        #expect(presigned.expiration == SigV4DocExample.date.addingTimeInterval(86400))
        #expect(presigned.securityToken == nil)
        let headers: [(name: String, value: String)] = [("Host", SigV4DocExample.host)]
        func verify(
            _ q: SigV4PresignedQuery = presigned, query items: [(name: String, value: String)] = query,
            path: String = "/test.txt", now: Date
        ) throws -> SigV4VerifiedRequest {
            try SigV4Verifier.verify(
                presigned: q, secretAccessKey: SigV4DocExample.credentials.secretAccessKey, method: "GET",
                canonicalURI: path, query: items, headers: headers, now: now)
        }
        let verified = try verify(now: SigV4DocExample.date.addingTimeInterval(3600))
        #expect(verified.payloadHash == SigV4.unsignedPayload)
        #expect(throws: SigV4Error.self) { try verify(now: SigV4DocExample.date.addingTimeInterval(86401)) }
        do {
            _ = try verify(now: SigV4DocExample.date.addingTimeInterval(86401))
        } catch let error as SigV4Error {
            #expect(error.code == .requestExpired)
        }
        // Dated an hour after the server's clock: not valid yet, which is not the same as expired.
        do {
            _ = try verify(now: SigV4DocExample.date.addingTimeInterval(-3600))
            Issue.record("a presigned URL dated in the future verified")
        } catch let error as SigV4Error {
            #expect(error.code == .requestNotYetValid)
        }
        do {
            _ = try verify(path: "/other.txt", now: SigV4DocExample.date)
            Issue.record("a presigned URL verified for another path")
        } catch let error as SigV4Error {
            #expect(error.code == .signatureDoesNotMatch)
        }
        do {
            _ = try verify(query: query + [("extra", "1")], now: SigV4DocExample.date)
            Issue.record("a presigned URL verified with an extra query parameter")
        } catch let error as SigV4Error {
            #expect(error.code == .signatureDoesNotMatch)
        }

        // Malformed presigned queries.
        func parseError(_ items: [(name: String, value: String)]) -> SigV4Error.Code? {
            do {
                _ = try SigV4PresignedQuery(parsing: items)
                return nil
            } catch { return error.code }
        }
        #expect(parseError(query.filter { $0.name != "X-Amz-Signature" }) == .malformedPresignedQuery)
        #expect(parseError(query.map { $0.name == "X-Amz-Expires" ? ($0.name, "604801") : $0 }) == .invalidExpires)
        // A URL valid for a negative time has expired already (403, as S3 treats it), not malformed.
        #expect(parseError(query.map { $0.name == "X-Amz-Expires" ? ($0.name, "-1") : $0 }) == .requestExpired)
        #expect(parseError(query.map { $0.name == "X-Amz-Expires" ? ($0.name, "-1x") : $0 }) == .invalidExpires)
        #expect(
            parseError(query.map { $0.name == "X-Amz-Date" ? ($0.name, "20130525T000000Z") : $0 })
                == .malformedPresignedQuery)
        #expect(
            parseError(query.map { $0.name == "X-Amz-Algorithm" ? ($0.name, "AWS4-HMAC-SHA1") : $0 })
                == .malformedPresignedQuery)
        #expect(parseError(query + [("X-Amz-Date", "20130524T000000Z")]) == .malformedPresignedQuery)
    }

    @Test("Presign with a session token and an extra signed header, verified by the server side")
    func presignRoundTrip() throws {
        let credentials = SigV4Credentials(accessKeyId: "AKIDTEST", secretAccessKey: "secret", sessionToken: "session")
        let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let items = try signer.presign(
            method: "PUT", path: "/bucket/a%20b", query: [("x-id", "PutObject")],
            host: "localhost:9000", expires: 900, date: date,
            extraHeaders: [("Content-Type", "image/png")])
        #expect(items.first { $0.name == "X-Amz-SignedHeaders" }?.value == "content-type;host")
        #expect(items.first { $0.name == "X-Amz-Security-Token" }?.value == "session")
        let rawQuery = items.map {
            "\(SigV4.uriEncode($0.name, encodeSlash: true))=\(SigV4.uriEncode($0.value, encodeSlash: true))"
        }
        .joined(separator: "&")
        let query = SigV4.parseQueryString(rawQuery)
        let presigned = try SigV4PresignedQuery(parsing: query)
        #expect(presigned.securityToken == "session")
        let headers: [(name: String, value: String)] = [("host", "localhost:9000"), ("content-type", "image/png")]
        let verified = try SigV4Verifier.verify(
            presigned: presigned, secretAccessKey: "secret", method: "PUT",
            canonicalURI: SigV4.canonicalURI(fromRawPath: "/bucket/a%20b"),
            query: query, headers: headers, now: date.addingTimeInterval(899))
        #expect(verified.accessKeyId == "AKIDTEST")
        #expect(throws: SigV4Error.self) {
            _ = try SigV4Verifier.verify(
                presigned: presigned, secretAccessKey: "secret", method: "PUT",
                canonicalURI: "/bucket/a%20b", query: query,
                headers: [("host", "localhost:9000"), ("content-type", "text/html")], now: date)
        }
    }
}
