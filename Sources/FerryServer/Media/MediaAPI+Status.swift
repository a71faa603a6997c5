import FerryCore
import Foundation

extension MediaAPI {
    /// The service's status (root key only): nodes, job queue, webhook backlog, catalog and store health, disk space.
    func getServiceStatus(_ input: MediaContract.ServiceStatusRequest, _ call: Call) async throws
        -> MediaContract.ServiceStatusAnswer
    {
        guard call.principal.isRoot else {
            throw MediaError("Forbidden", "Only the root key sees the service's status.", status: 403)
        }
        return await status.report()
    }
}
