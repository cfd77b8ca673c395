// Placeholder start job until the frontend exists: prints what is built so far.
console.log('kvrouter: the frontend is not built yet; run `npm test` for the test suite or `pnpm bench`.');
