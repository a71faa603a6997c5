import Crypto
import FerryCore
import FerryTestSupport
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import FerryServer
@testable import FerryStorage

@Suite("Blob files", .timeLimit(.minutes(10)))
struct BlobFilesTests {
    /// Sizes around the direct-I/O alignment (4 KiB) and the write block (1 MiB), and bodies of several blocks.
    static let sizes = [0, 1, 4095, 4096, 4097, 1 << 20 - 1, 1 << 20, 1 << 20 + 1, 3 << 20 + 12_345]

    @Test("A body is stored byte for byte with its MD5 and CRC32C, with and without direct I/O", arguments: [true, false])
    func roundTrip(direct: Bool) async throws {
        let root = TemporaryDirectory.make("ferry-blobs")
        defer { try? FileManager.default.removeItem(atPath: root) }
        var files = try BlobFiles(root: root)
        files.directIO = direct
        for size in Self.sizes {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
            let (path, digests) = try await files.write(
                Self.body(bytes, pieces: [7_000, 65_536, 1, 300_000]), checksums: [.crc32c], maxSize: 1 << 30)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == bytes, "size \(size)")
            #expect(digests.size == Int64(size))
            #expect(digests.md5 == Array(Insecure.MD5.hash(data: bytes)), "size \(size)")
            var crc = Checksummer(.crc32c)
            crc.update(bytes)
            #expect(digests.checksums["CRC32C"] == crc.finalize(), "size \(size)")
            let name = try await files.commit(tempPath: path)
            var read: [UInt8] = []
            for try await buffer in BlobByteSequence(storage: files, manifest: [BlobSegment(blob: name, size: Int64(size))], range: nil) {
                read += buffer.readableBytesView
            }
            #expect(read == bytes, "size \(size)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.tmpDirectory).isEmpty)
    }

    @Test("A blob is acknowledged only once its name is durable: every blob folder is made and synced at start, a folder made later is synced into its parent, and a directory sync that fails fails the commit or link, leaving no name behind")
    func durableNames() async throws {
        let root = TemporaryDirectory.make("ferry-blobs") + "/objects"
        defer { try? FileManager.default.removeItem(atPath: (root as NSString).deletingLastPathComponent) }
        var files = try BlobFiles(root: root)
        let folders = try FileManager.default.contentsOfDirectory(atPath: files.blobDirectory)
        #expect(Set(folders) == Set((0...255).map { Hex.encode([UInt8($0)]) }))
        let synced = NIOLockedValueBox<[String]>([])
        files.syncDirectory = { path in synced.withLockedValue { $0.append(path) } }
        files.directIO = false

        func stored() throws -> Int {
            try folders.reduce(0) { $0 + (try FileManager.default.contentsOfDirectory(atPath: files.blobDirectory + "/" + $1).count) }
        }
        let bytes = [UInt8](repeating: 5, count: 10_000)
        var (path, _) = try await files.write(Self.body(bytes, pieces: [4096]), checksums: [], maxSize: 1 << 20)
        let name = try await files.commit(tempPath: path)
        let folder = (files.path(of: name) as NSString).deletingLastPathComponent
        #expect(synced.withLockedValue { $0 } == [folder])
        // A folder removed since the start is made again, and synced into blobs/ before the blob is named in it.
        let second = try await files.link(name)
        let secondFolder = (files.path(of: second) as NSString).deletingLastPathComponent
        #expect(synced.withLockedValue { $0 }.last == secondFolder)
        synced.withLockedValue { $0 = [] }
        #expect(unlink(files.path(of: second)) == 0)
        let emptied = folders.map { files.blobDirectory + "/" + $0 }.filter {
            $0 != folder && (try? FileManager.default.contentsOfDirectory(atPath: $0).isEmpty) == true
        }
        for empty in emptied { #expect(rmdir(empty) == 0) }
        let third = try await files.link(name)
        let thirdFolder = (files.path(of: third) as NSString).deletingLastPathComponent
        // (Unless it fell in the one folder kept.)
        #expect(synced.withLockedValue { $0 } == (thirdFolder == folder ? [] : [files.blobDirectory]) + [thirdFolder])
        #expect(unlink(files.path(of: third)) == 0)
        for empty in emptied where !FileManager.default.fileExists(atPath: empty) { #expect(mkdir(empty, 0o700) == 0) }

        // The sync fails (EIO): the commit and the link throw, and no new name stays.
        files.syncDirectory = { _ in throw POSIXFileError("fsync", EIO) }
        let before = try stored()
        (path, _) = try await files.write(Self.body(bytes, pieces: [4096]), checksums: [], maxSize: 1 << 20)
        await #expect(throws: POSIXFileError.self) { try await files.commit(tempPath: path) }
        await #expect(throws: POSIXFileError.self) { try await files.link(name) }
        #expect(try stored() == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.tmpDirectory).isEmpty)
    }

    @Test("Block pool: a block given back is taken again; a full pool unmaps what it cannot keep")
    func blockPool() throws {
        let pool = BlockPool(size: 1 << 20, limit: 2)
        let first = try #require(pool.take())
        #expect(Int(bitPattern: first) % 4096 == 0)
        first.storeBytes(of: 0xFE, as: UInt8.self)
        #expect(pool.inUse == 1)
        pool.give(first)
        #expect(pool.idleCount == 1 && pool.inUse == 0)
        #expect(pool.take() == first)
        let blocks = try (0..<4).map { _ in try #require(pool.take()) }
        #expect(Set(blocks).count == 4 && pool.inUse == 5)
        for block in blocks { pool.give(block) }
        pool.give(first)
        #expect(pool.idleCount == 2 && pool.inUse == 0)
    }

    @Test("Turns: no more than their number are held at once and a waiter gets a turn handed back; bodies written at once through fewer turns than their blocks are all stored and leave every turn free")
    func turns() async throws {
        let turns = Turns(2)
        await turns.acquire()
        await turns.acquire()
        #expect(turns.free == 0)
        let order = NIOLockedValueBox<[Int]>([])
        let waiters = (1...2).map { index in
            Task {
                await turns.acquire()
                order.withLockedValue { $0.append(index) }
            }
        }
        // Neither waiter has a turn while both are held.
        try await Task.sleep(for: .milliseconds(200))
        #expect(order.withLockedValue { $0 }.isEmpty)
        turns.release()
        turns.release()
        for waiter in waiters { await waiter.value }
        #expect(Set(order.withLockedValue { $0 }) == [1, 2] && turns.free == 0)
        turns.release()
        turns.release()
        #expect(turns.free == 2)

        // Many bodies at once, more blocks than the turns: all stored, every turn given back.
        let directory = TemporaryDirectory.make("ferry-blob-turns")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var settings = try BlobFiles(root: directory)
        // Turns of their own: other tests running at once write bodies through the shared ones.
        settings.turns = Turns(4)
        let files = settings
        let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    let written = try await files.write(Self.body(bytes, pieces: [65_536]), checksums: [], maxSize: 1 << 30)
                    #expect(written.digests.md5 == Array(Insecure.MD5.hash(data: bytes)))
                    await files.discard(tempPath: written.tempPath)
                }
            }
            try await group.waitForAll()
        }
        #expect(files.turns.free == 4)
    }

    @Test("Chunk buffers: any size and any growth keeps its bytes, whichever block or mapping holds them")
    func readBuffers() {
        let allocator = ReadBuffers.allocator
        for size in [0, 1, 4096, ReadBuffers.smallBuffer - 1, ReadBuffers.smallBuffer, BlobFiles.readChunk, BlobFiles.readChunk + 1, 3 << 20] {
            var buffer = allocator.buffer(capacity: size)
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }
            buffer.writeBytes(bytes)
            // A copy that is written to gets storage of its own from the same allocator; a chunk-sized buffer grows
            // out of its pooled block into a mapping of its own.
            var copy = buffer
            copy.writeBytes([1, 2, 3])
            buffer.writeBytes([UInt8](repeating: 9, count: BlobFiles.readChunk))
            #expect(Array(buffer.readableBytesView.prefix(size)) == bytes, "size \(size)")
            #expect(Array(buffer.readableBytesView.dropFirst(size)) == [UInt8](repeating: 9, count: BlobFiles.readChunk))
            #expect(Array(copy.readableBytesView) == bytes + [1, 2, 3], "size \(size)")
        }
    }

    @Test("A body over the size limit, or one that fails, leaves no temporary file", arguments: [true, false])
    func failuresLeaveNothing(direct: Bool) async throws {
        let root = TemporaryDirectory.make("ferry-blobs")
        defer { try? FileManager.default.removeItem(atPath: root) }
        var files = try BlobFiles(root: root)
        files.directIO = direct
        let bytes = [UInt8](repeating: 7, count: 3 << 20)
        await #expect(throws: FerryDomainError.self) {
            _ = try await files.write(Self.body(bytes, pieces: [65_536]), checksums: [], maxSize: 2 << 20)
        }
        struct Broken: Error {}
        let failing = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
            continuation.yield(ByteBuffer(bytes: bytes))
            continuation.finish(throwing: Broken())
        }
        await #expect(throws: Broken.self) {
            _ = try await files.write(failing, checksums: [.crc32], maxSize: 1 << 30)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.tmpDirectory).isEmpty)
    }

    /// `bytes` as buffers whose sizes cycle through `pieces`.
    static func body(_ bytes: [UInt8], pieces: [Int]) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            var offset = 0
            var index = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + pieces[index % pieces.count])
                continuation.yield(ByteBuffer(bytes: bytes[offset..<end]))
                offset = end
                index += 1
            }
            continuation.finish()
        }
    }
}
