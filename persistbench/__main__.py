from persistbench.cli import main

main()
