from ralp.bench.cli import main

main()
