export { VirtualClock, type Clock, type TimerHandle, type Timers } from './clock.js';
export { silentLogger, formatLogLine, type Logger, type LogLevel } from './log.js';
export { parseEndpoint, formatEndpoint, type EndpointPath, type ParseEndpointOptions } from './endpoint.js';
export { defaultEventPlane, type DiscoveryBackendKind } from './event-plane.js';
