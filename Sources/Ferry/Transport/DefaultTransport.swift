@_exported import FerryCore
@_exported import FerryTransport

#if os(Linux)
@_exported import FerryAsyncHTTPClient
#endif

/// The transport Ferry's clients use unless told otherwise: ``URLSessionTransport`` on Apple platforms (so an app
/// links no SwiftNIO), `AsyncHTTPClientTransport` on Linux. An Apple app that wants AsyncHTTPClient adds the
/// `FerryAsyncHTTPClient` product and sets the transport in its configuration.
func platformDefaultTransport() -> any HTTPTransport {
    #if os(Linux)
    AsyncHTTPClientTransport()
    #else
    URLSessionTransport()
    #endif
}
