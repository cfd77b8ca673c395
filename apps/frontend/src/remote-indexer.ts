/** `--use-remote-indexer` lives in `@kvrouter/router-host` (the router wiring layer); re-exported for this app's tests. */
export { REMOTE_QUERY_TIMEOUT_MS, createRemoteIndex, type RemoteIndexOptions } from '@kvrouter/router-host';
