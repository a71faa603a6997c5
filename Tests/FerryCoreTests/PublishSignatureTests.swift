import FerryCore
import Foundation
import Testing

@Suite("Publish signature", .timeLimit(.minutes(10)))
struct PublishSignatureTests {
    static let secret = "test-root-secret-key-0123456789"

    /// Computed independently with Python:
    /// ```
    /// fields = [('secretId','FKIATESTROOT0000'), ('currentTimeStamp','1700000000'), ('expireTime','1700086400'),
    ///           ('random','220625'), ('procedure','QCVB_SimpleProcessFile(1, 1)'), ('classId','7'),
    ///           ('sourceContext','user=carol&ios')]
    /// original = '&'.join(k + '=' + urllib.parse.quote(v, safe='') for k, v in fields)
    /// mac = hmac.new(b'test-root-secret-key-0123456789', original.encode(), hashlib.sha1).digest()
    /// base64.b64encode(mac + original.encode())
    /// ```
    /// HMAC-SHA1 = 3c81a3c93e4b1a7d7b208139858dcc8563e26835.
    static let knownSignature =
        "PIGjyT5LGn17IIE5hY3MhWPiaDVzZWNyZXRJZD1GS0lBVEVTVFJPT1QwMDAwJmN1cnJlbnRUaW1lU3RhbXA9MTcwMDAwMDAwMCZleHBpcmVUaW1lPTE3MDAwODY0MDAmcmFuZG9tPTIyMDYyNSZwcm9jZWR1cmU9UUNWQl9TaW1wbGVQcm9jZXNzRmlsZSUyODElMkMlMjAxJTI5JmNsYXNzSWQ9NyZzb3VyY2VDb250ZXh0PXVzZXIlM0RjYXJvbCUyNmlvcw=="
    static let knownOriginal =
        "secretId=FKIATESTROOT0000&currentTimeStamp=1700000000&expireTime=1700086400&random=220625&procedure=QCVB_SimpleProcessFile%281%2C%201%29&classId=7&sourceContext=user%3Dcarol%26ios"

    static let fields = PublishSignature(
        secretId: "FKIATESTROOT0000", currentTimeStamp: 1_700_000_000, expireTime: 1_700_086_400, random: 220_625,
        procedure: "QCVB_SimpleProcessFile(1, 1)", classId: 7, sourceContext: "user=carol&ios")

    @Test("signing matches an independently computed base64(HMAC-SHA1(secret, original) + original)")
    func knownAnswer() {
        #expect(Self.fields.original == Self.knownOriginal)
        #expect(Self.fields.sign(secretKey: Self.secret) == Self.knownSignature)
    }

    @Test("parsing recovers every field, the MAC and the original bytes; the MAC verifies with the secret only")
    func parseAndVerify() throws {
        let parsed = try PublishSignature.parse(Self.knownSignature)
        #expect(parsed.signature == Self.fields)
        #expect(parsed.mac.map { String(format: "%02x", $0) }.joined() == "3c81a3c93e4b1a7d7b208139858dcc8563e26835")
        #expect(String(decoding: parsed.original, as: UTF8.self) == Self.knownOriginal)
        #expect(parsed.isValid(secretKey: Self.secret))
        #expect(!parsed.isValid(secretKey: Self.secret + "x"))
        #expect(!parsed.isValid(secretKey: ""))
    }

    @Test("the minimal form (four fields) round-trips; a space may arrive as +")
    func minimal() throws {
        let signature = PublishSignature(secretId: "AKID", currentTimeStamp: 1, expireTime: 2, random: 3)
        #expect(signature.original == "secretId=AKID&currentTimeStamp=1&expireTime=2&random=3")
        // python: base64(hmac_sha1(b'k', original) + original)
        #expect(
            signature.sign(secretKey: "k")
                == "52Rhxdm0dIJhrsN9oX8wS1YqrZpzZWNyZXRJZD1BS0lEJmN1cnJlbnRUaW1lU3RhbXA9MSZleHBpcmVUaW1lPTImcmFuZG9tPTM="
        )
        let parsed = try PublishSignature.parse(signature.sign(secretKey: "k"))
        #expect(parsed.signature == signature)
        #expect(parsed.signature.procedure == nil && parsed.signature.classId == nil)

        let plus = Data(
            [UInt8](repeating: 0, count: 20)
                + Array("secretId=a&currentTimeStamp=1&expireTime=2&random=3&procedure=a+b".utf8))
        #expect(try PublishSignature.parse(plus.base64EncodedString()).signature.procedure == "a b")
    }

    @Test("a changed field, a changed MAC or a different secret does not verify")
    func tampering() throws {
        var bytes = [UInt8](Data(base64Encoded: Self.knownSignature)!)
        bytes[bytes.count - 1] ^= 0x01  // last byte of the original
        #expect(try !PublishSignature.parse(Data(bytes).base64EncodedString()).isValid(secretKey: Self.secret))
        bytes = [UInt8](Data(base64Encoded: Self.knownSignature)!)
        bytes[0] ^= 0x80  // first byte of the MAC
        #expect(try !PublishSignature.parse(Data(bytes).base64EncodedString()).isValid(secretKey: Self.secret))
        var longer = Self.fields
        longer.expireTime += 1
        let forged = Data(
            [UInt8](Data(base64Encoded: Self.knownSignature)!.prefix(20)) + Array(longer.original.utf8))
        #expect(try !PublishSignature.parse(forged.base64EncodedString()).isValid(secretKey: Self.secret))
    }

    @Test(
        "malformed signatures are rejected with the malformed code and a message that does not repeat them",
        arguments: [
            "", "   ", "not base64!", Data([1, 2, 3]).base64EncodedString(),
            Data([UInt8](repeating: 7, count: 20) + Array("secretId=a&currentTimeStamp=1&expireTime=2".utf8))
                .base64EncodedString(),
            Data([UInt8](repeating: 7, count: 20) + Array("secretId=a&currentTimeStamp=x&expireTime=2&random=3".utf8))
                .base64EncodedString(),
            Data([UInt8](repeating: 7, count: 20) + Array("secretId=&currentTimeStamp=1&expireTime=2&random=3".utf8))
                .base64EncodedString(),
            Data(
                [UInt8](repeating: 7, count: 20)
                    + Array("secretId=a&currentTimeStamp=1&expireTime=2&random=3&classId=seven".utf8)
            ).base64EncodedString(),
            Data([UInt8](repeating: 7, count: 20) + [0xff, 0xfe]).base64EncodedString(),
        ])
    func malformed(_ text: String) {
        do {
            _ = try PublishSignature.parse(text)
            Issue.record("parsed \(text)")
        } catch {
            #expect(error.code == .malformed)
            #expect(!error.message.isEmpty)
            #expect(text.count < 8 || !error.message.contains(text))
        }
    }

    @Test("verify: the right secret passes, an unknown key or wrong secret is invalid, expiry is checked after the MAC")
    func verify() async throws {
        let now = Date(timeIntervalSince1970: 1_700_000_100)
        let lookup: (String) async throws -> String? = { $0 == "FKIATESTROOT0000" ? Self.secret : nil }
        #expect(try await PublishSignature.verify(Self.knownSignature, now: now, secretKey: lookup) == Self.fields)

        func code(_ signature: String, at date: Date, _ secretKey: @escaping (String) async throws -> String?) async
            -> PublishSignatureError.Code?
        {
            do {
                _ = try await PublishSignature.verify(signature, now: date, secretKey: secretKey)
                return nil
            } catch let error as PublishSignatureError {
                return error.code
            } catch {
                return nil
            }
        }
        let later = Date(timeIntervalSince1970: 1_700_086_401)
        #expect(await code(Self.knownSignature, at: later, lookup) == .expired)
        #expect(await code(Self.knownSignature, at: now, { _ in nil }) == .invalid)
        #expect(await code(Self.knownSignature, at: now, { _ in "wrong" }) == .invalid)
        // A forged signature is invalid even when it is also expired: expiry is never disclosed to a forger.
        #expect(await code(Self.knownSignature, at: later, { _ in "wrong" }) == .invalid)
        #expect(Self.fields.isExpired(at: later))
        // Fields the service refuses: valid for longer than 90 days, issued in the future to stretch that, oneTimeValid
        // other than 0 or 1.
        var long = Self.fields
        long.expireTime = long.currentTimeStamp + PublishSignature.longestValidity + 1
        var once = Self.fields
        once.oneTimeValid = 2
        var ahead = Self.fields
        ahead.currentTimeStamp += 365 * 86_400
        ahead.expireTime += 365 * 86_400
        // Expiring before it was made; made long after now, for a short while.
        var backwards = Self.fields
        backwards.expireTime = backwards.currentTimeStamp - 1
        var future = Self.fields
        future.currentTimeStamp = 1_700_000_100 + 80 * 86_400
        future.expireTime = future.currentTimeStamp + 600
        for fields in [long, once, ahead, backwards, future] {
            #expect(fields.problem(at: now) != nil)
            #expect(await code(fields.sign(secretKey: Self.secret), at: now, lookup) == .invalid)
        }
        long.expireTime -= 1
        once.oneTimeValid = 1
        ahead.currentTimeStamp = 1_700_000_100 + 500
        ahead.expireTime = ahead.currentTimeStamp + 86_400
        #expect(long.problem(at: now) == nil && once.problem(at: now) == nil && ahead.problem(at: now) == nil)
        #expect(!Self.fields.isExpired(at: Date(timeIntervalSince1970: 1_700_086_400)))
    }
}
