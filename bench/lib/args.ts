// The benchmarks' command lines: `--name value` options and word lists.

/** The value after `--name` in argv, or undefined. */
export function optionReader(argv: readonly string[]): (name: string) => string | undefined {
  return (name) => {
    const i = argv.indexOf(name);
    return i === -1 ? undefined : argv[i + 1];
  };
}

/** A quoted option split into words (`--kubegc-args "--a --b"`). */
export const words = (text: string | undefined): string[] =>
  (text ?? '').split(' ').filter(Boolean);
