/** `--router-prefill-load-model aic` is built by `@kvrouter/router-host`; re-exported for this app's tests. */
export { buildAicPredictor, readTextFile } from '@kvrouter/router-host';
