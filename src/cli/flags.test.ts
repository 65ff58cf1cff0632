import { parseDuration, parseFlags, UsageError, type FlagSpecs } from './flags.ts';

const specs: FlagSpecs = {
  workers: {
    kind: 'int',
    help: 'workers',
    default: '20',
    validate: (v) => ((v as number) < 1 ? 'must be at least 1' : undefined),
  },
  qps: { kind: 'number', help: 'qps', default: '50' },
  'dry-run': { kind: 'bool', help: 'dry run', default: 'false' },
  period: { kind: 'duration', help: 'period', default: '30s' },
  ignored: { kind: 'list', help: 'ignored', default: '' },
  kubeconfig: { kind: 'string', help: 'kubeconfig' },
};

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
