// The contract between the bench runner and each scenario in native-bench/scenarios/<name>.ts.
export interface BenchResult {
  /** One line: the question the scenario answers. */
  title: string;
  columns: string[];
  rows: Array<Array<string | number>>;
  /** Machine, command, caveats: printed under the table. */
  notes?: string[];
  /** Anything else worth keeping in the JSON file. */
  extra?: Record<string, unknown>;
  /** Set when the scenario's own pass rule failed: the runner prints it and exits 1. */
  failed?: string;
}

/** A scenario module's default export. `args` are the CLI words after the scenario name. */
export type BenchScenario = (args: string[]) => Promise<BenchResult>;
