/** `--use-remote-indexer` lives in `@kvrouter/router-host` (the router wiring layer); re-exported for this app's tests. */
export { createRemoteIndex } from '@kvrouter/router-host';
