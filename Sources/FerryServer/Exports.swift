// The layers under the edge, so that `import FerryServer` names the whole service: its storage and catalogs, and its
// media library, jobs and webhooks.
@_exported import FerryMedia
@_exported import FerryStorage
