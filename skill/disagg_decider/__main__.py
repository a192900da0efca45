from disagg_decider.entry import main

main()
