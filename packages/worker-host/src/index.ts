export {
  WorkerRegistration,
  activeLoad,
  listenRequestPlane,
  openWorkerEvents,
  type RequestPlaneSpec,
  type WorkerEvents,
  type WorkerEventsOptions,
  type WorkerRegistrationOptions,
} from './host.js';
