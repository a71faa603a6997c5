import FerryCore
import Foundation
import Testing

@testable import Ferry

/// A transport whose requests never answer until they are cancelled; it signals each request it holds.
struct SilentTransport: HTTPTransport {
    var holding = Signals()

    func send(
        _ request: TransportRequest, bodyProgress: @escaping @Sendable (Int) -> Void,
        responseSink: (@Sendable ([UInt8]) async throws -> Void)?
    ) async throws -> TransportResponse {
        holding.signal()
        try await Task.sleep(for: .seconds(3600))
        throw TransportError("no answer")
    }
}

/// The client's entry points throw `FerryError` itself (`throws(FerryError)`): a `catch` reads `error.code` with no
/// cast — these tests would not compile otherwise — and what is not a Ferry failure underneath (cancellation, a file
/// that cannot be read) arrives as one with its code.
@Suite("One error type at the client's entry points", .timeLimit(.minutes(10)))
struct TypedErrorTests {
    static let closed = URL(string: "http://127.0.0.1:1")!
    static let credentials = Credentials(accessKeyId: "AKID", secretAccessKey: "secret")

    static func configuration(_ transport: any HTTPTransport) -> ObjectStorageClient.Configuration {
        var configuration = ObjectStorageClient.Configuration()
        configuration.transport = transport
        configuration.retryPolicy = .none
        return configuration
    }

    @Test("S3 and media calls to a closed port fail with network; a cancelled call fails with cancelled")
    func networkAndCancellation() async throws {
        let client = ObjectStorageClient(
            endpoint: Self.closed, credentials: Self.credentials, configuration: Self.configuration(AsyncHTTPClientTransport()))
        do {
            _ = try await client.headObject(bucket: "b", key: "k")
            Issue.record("a closed port answered")
        } catch {
            #expect(error.code == .network)
            #expect(error.clientRequestId != nil)
        }
        let media = MediaServiceClient(
            endpoint: Self.closed, credentials: Self.credentials, configuration: Self.configuration(AsyncHTTPClientTransport()))
        do {
            _ = try await media.getVideoInfo(videoId: "v")
            Issue.record("a closed port answered")
        } catch {
            #expect(error.code == .network)
        }

        let silentTransport = SilentTransport()
        let silent = ObjectStorageClient(
            endpoint: Self.closed, credentials: Self.credentials, configuration: Self.configuration(silentTransport))
        let call = Task { () -> FerryError? in
            do {
                _ = try await silent.getObject(bucket: "b", key: "k")
                return nil
            } catch let error as FerryError {
                return error
            } catch {
                Issue.record("not a FerryError: \(error)")
                return nil
            }
        }
        // Cancelled while its request is in flight.
        #expect(await silentTransport.holding.wait(for: 1))
        call.cancel()
        let error = await call.value
        #expect(error?.code == .cancelled)
    }

    @Test("a session token that is no header value (a stray line break) fails without the token in the error")
    func unsendableTokenNotQuoted() async throws {
        let token = "SESSION-\(UUID().uuidString)"
        let client = ObjectStorageClient(
            endpoint: Self.closed,
            credentials: Credentials(accessKeyId: "AKID", secretAccessKey: "secret", sessionToken: token + "\r\n"),
            configuration: Self.configuration(AsyncHTTPClientTransport()))
        do {
            _ = try await client.headObject(bucket: "b", key: "k")
            Issue.record("a request with a line break in a header was sent")
        } catch {
            let told = "\(error) \(String(reflecting: error)) \(error.message)"
            #expect(told.contains("Invalid header field values"), "\(told)")
            #expect(!told.contains(token), "\(told)")
        }
    }

    @Test("a file that cannot be read is fileNotFound, from the engine, the form uploader and the media journal")
    func unreadableFiles() async throws {
        let missing = URL(fileURLWithPath: "/nonexistent/ferry-\(UUID().uuidString).mov")
        let client = ObjectStorageClient(
            endpoint: Self.closed, credentials: Self.credentials, configuration: Self.configuration(SilentTransport()))
        do {
            _ = try await client.upload(file: missing, bucket: "b", key: "k")
            Issue.record("a missing file started an upload")
        } catch {
            #expect(error.code == .fileNotFound)
        }
        do {
            _ = try await FormUploader.crc32(of: missing)
            Issue.record("a missing file has a CRC32")
        } catch {
            #expect(error.code == .fileNotFound)
        }
        do {
            _ = try MediaUploadJournal.clientToken(for: missing)
            Issue.record("a missing file has a client token")
        } catch {
            #expect(error.code == .fileNotFound)
        }
    }

    @Test("an upload ticket prints, debug-prints and dumps without its credential or its upload URL")
    func ticketsPrintNoSecret() throws {
        let auth = UploadAuth(
            accessKeyId: "STSKEY", accessKeySecret: "sts-secret-value", securityToken: "token-value",
            expiration: Date().addingTimeInterval(600), region: "us-east-1")
        let address = UploadAddress(endpoint: "http://127.0.0.1:9000", bucket: "media", fileName: "video/v/source.mp4")
        var ticket = try MediaServiceClient.UploadTicket(id: "v", address: address.encoded(), auth: auth.encoded())
        ticket.resumableUploadURL = URL(string: "http://127.0.0.1:9000/_ferry/uploads/grant/grant-value")
        var dumped = ""
        dump(ticket, to: &dumped)
        for text in ["\(ticket)", String(reflecting: ticket), dumped] {
            for secret in ["sts-secret-value", "token-value", "grant-value", auth.encoded()] {
                #expect(!text.contains(secret), "\(text)")
            }
        }
        #expect("\(ticket)".contains("video/v/source.mp4") && dumped.contains("STSKEY"), "\(dumped)")
    }

    @Test("publish parameters and a form uploader print, debug-print and dump without the publish signature or the upload token")
    func publishAndFormPrintNoSecret() throws {
        let parameters = PublishParameters(signature: "publish-signature-value", videoPath: "/media/clip.mp4")
        let uploader = FormUploader(endpoint: URL(string: "http://127.0.0.1:9000")!, token: "form-token-value")
        for (value, secret, shown) in [
            (parameters as Any, "publish-signature-value", "/media/clip.mp4"), (uploader as Any, "form-token-value", "127.0.0.1:9000"),
        ] {
            var dumped = ""
            dump(value, to: &dumped)
            for text in ["\(value)", String(reflecting: value), "\([value])", dumped] {
                #expect(!text.contains(secret), "\(text)")
                #expect(text.contains(shown), "\(text)")
            }
        }
    }

    @Test("an upload ticket that cannot be decoded, and a queue item that does not exist, are refused with their codes")
    func badTickets() async throws {
        do {
            _ = try MediaServiceClient.UploadTicket(id: "v", address: "not base64", auth: "not base64")
            Issue.record("an unreadable ticket was read")
        } catch {
            // What an app gives is the app's input.
            #expect(error.code == .invalidArgument)
        }
        let queue = UploadQueue(authorization: .sts(endpoint: Self.closed, credentials: Self.credentials))
        do {
            try await queue.setUploadAuth("e30=", address: "e30=", for: UploadQueue.Item.ID(value: 4242))
            Issue.record("an unknown item took a credential")
        } catch {
            #expect(error.code == .invalidArgument)
        }
    }
}
