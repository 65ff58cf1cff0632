import { parseDuration, parseFlags, UsageError, type FlagSpecs } from './flags.ts';

const specs = {
  workers: {
    kind: 'int',
    help: 'workers',
    default: '20',
    validate: (v) => (v < 1 ? 'must be at least 1' : undefined),
  },
  qps: { kind: 'number', help: 'qps', default: '50' },
  'dry-run': { kind: 'bool', help: 'dry run', default: 'false' },
  period: { kind: 'duration', help: 'period', default: '30s' },
  ignored: { kind: 'list', help: 'ignored', default: '' },
  kubeconfig: { kind: 'string', help: 'kubeconfig' },
} satisfies FlagSpecs;

describe('parseDuration', () => {
  test.each([
    ['0', 0],
    ['500ms', 500],
    ['30s', 30_000],
    ['2m', 120_000],
    ['1h30m', 5_400_000],
    ['1.5s', 1500],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  test.each(['', '10', 's', '5x', '1m-', 'abc'])('rejects %p', (text) => {
    expect(() => parseDuration(text)).toThrow(UsageError);
  });
});

describe('parseFlags', () => {
  test('applies defaults', () => {
    expect(parseFlags([], specs).flags).toEqual({
      workers: 20,
      qps: 50,
      'dry-run': false,
      period: 30_000,
      ignored: [],
    });
  });

  test('reads both --name value and --name=value, bools without a value', () => {
    const { flags, args } = parseFlags(
      [
        '--workers',
        '5',
        '--qps=7.5',
        '--dry-run',
        '--period=1m',
        '--ignored',
        'a.b, c',
        'pos',
        '--kubeconfig=/k',
      ],
      specs,
    );
    expect(flags).toEqual({
      workers: 5,
      qps: 7.5,
      'dry-run': true,
      period: 60_000,
      ignored: ['a.b', 'c'],
      kubeconfig: '/k',
    });
    expect(args).toEqual(['pos']);
  });

  test.each([
    [['--nope'], /unknown flag --nope/],
    [['-x'], /unknown flag -x/],
    [['--workers'], /--workers needs a value/],
    [['--workers', 'many'], /not an integer/],
    [['--workers', '0'], /must be at least 1/],
    [['--qps', 'fast'], /not a number/],
    [['--dry-run=yes'], /not true or false/],
    [['--period', '10'], /invalid duration/],
  ])('%p is a usage error', (argv, message) => {
    expect(() => parseFlags(argv, specs)).toThrow(message);
  });
});

describe('the flag table types the values (checked by npm run typecheck)', () => {
  test("each value has its kind's type; undefined only without a default", () => {
    const { flags } = parseFlags(['--kubeconfig', '/k'], specs);
    const workers: number = flags.workers;
    const dryRun: boolean = flags['dry-run'];
    const ignored: string[] = flags.ignored;
    const kubeconfig: string | undefined = flags.kubeconfig;
    // @ts-expect-error a flag without a default may be absent
    const required: string = flags.kubeconfig;
    // @ts-expect-error an int is not a string
    const wrong: string = flags.workers;
    // @ts-expect-error no such flag
    void flags.nope;
    expect([workers, dryRun, ignored, kubeconfig, required, wrong]).toEqual([
      20,
      false,
      [],
      '/k',
      '/k',
      20,
    ]);
  });

  test('a validator of another kind is refused', () => {
    const specsWithWrongValidator = {
      // @ts-expect-error a string flag cannot take a number's validator
      name: { kind: 'string', help: 'name', validate: (v: number) => (v < 1 ? 'no' : undefined) },
    } satisfies FlagSpecs;
    expect(Object.keys(specsWithWrongValidator)).toEqual(['name']);
  });
});
