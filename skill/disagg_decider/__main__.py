from disagg_decider.cli import main

main()
