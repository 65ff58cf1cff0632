// Prints one plain closing line per jest run, e.g. "unit: 12 passed, 0 failed",
// so CI logs show the count whatever the default reporter prints above it.
export default class SummaryReporter {
  onRunComplete(_contexts, results) {
    const projects = [
      ...new Set(results.testResults.map((r) => r.displayName?.name).filter(Boolean)),
    ];
    const label = projects.length === 1 ? projects[0] : 'tests';
    const skipped = results.numPendingTests + results.numTodoTests;
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(
      `\n${label}: ${results.numPassedTests} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`,
    );
  }
}
