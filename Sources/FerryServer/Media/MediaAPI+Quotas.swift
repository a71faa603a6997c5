import FerryCore
import Foundation

/// Quotas of access keys through the media API: UpdateAccessKey sets them, GetUsage reports what a key holds against
/// them, and CreateUploadVideo is refused past the videos and bytes a key may have.
extension MediaAPI {
    /// A stored key as ListAccessKeys and UpdateAccessKey describe it (never its secret).
    static func describe(_ key: StoredAccessKey) -> MediaContract.AccessKey {
        MediaContract.AccessKey(
            accessKeyId: key.accessKeyId, status: key.status.rawValue, description: key.description,
            creationTime: key.createdAt.formatted(.iso8601), policy: key.policy,
            quota: key.quota.isUnlimited ? nil : key.quota)
    }

    /// Refuses a quota with a negative limit or an unusable rate.
    static func checkQuota(_ quota: AccessKeyQuota) throws {
        if let problem = quota.problem { throw MediaError.invalid("Quota", "is not valid: \(problem)") }
    }

    /// Sets a key's quota (root only); its temporary credentials follow at once.
    func updateAccessKey(_ input: MediaContract.UpdateAccessKeyRequest, _ call: Call) async throws
        -> MediaContract.AccessKeyAnswer
    {
        try requireRoot(call.principal)
        guard let id = input.accessKeyId, !id.isEmpty else { throw MediaError.missing("AccessKeyId") }
        guard let quota = input.quota else { throw MediaError.missing("Quota") }
        try Self.checkQuota(quota)
        guard try await catalog.setAccessKeyQuota(id, quota), let key = try await catalog.accessKey(id) else {
            throw MediaError.notFound("AccessKey", id)
        }
        return MediaContract.AccessKeyAnswer(accessKey: Self.describe(key))
    }

    /// What a long-term key holds, with its quota: the root key asks about any key (itself when it names none), any
    /// other caller about the key it is or was issued under.
    func getUsage(_ input: MediaContract.GetUsageRequest, _ call: Call) async throws -> MediaContract.UsageAnswer {
        let principal = call.principal
        let id = input.accessKeyId.flatMap { $0.isEmpty ? nil : $0 } ?? principal.parentAccessKeyId
        var quota: AccessKeyQuota
        if id == principal.parentAccessKeyId {
            quota = principal.quota
        } else {
            guard principal.isRoot else {
                throw MediaError("Forbidden", "A key may ask about its own usage only.", status: 403)
            }
            guard let key = try await catalog.accessKey(id) else { throw MediaError.notFound("AccessKey", id) }
            quota = key.quota
        }
        if id == credentials.root.accessKeyId { quota = .unlimited }
        let stored = try await store.usage(owner: id)
        return MediaContract.UsageAnswer(
            accessKeyId: id,
            usage: .init(
                storageBytes: stored.storedBytes, videos: try await catalog.videoCount(owner: id),
                uploadsInProgress: stored.uploadsInProgress),
            quota: quota.isUnlimited ? nil : quota)
    }

    /// Refuses a new video when the caller's key is at its byte quota, or declares a file (`FileSize`) that would take
    /// it past it. (Its `Videos` quota is checked where the video is created, ``MediaCatalog/createVideo(_:videoLimit:)``.)
    func checkStorageQuota(forVideoOf declaredSize: Int64?, _ principal: Principal) async throws {
        if let limit = principal.quota.storageBytes {
            let stored = try await store.usage(owner: principal.parentAccessKeyId).storedBytes
            if stored >= limit || StorageQuotaCheck.exceeds(stored: stored, adding: declaredSize ?? 0, limit: limit) {
                throw FerryDomainError.storageQuotaExceeded(limit: limit)
            }
        }
    }
}
