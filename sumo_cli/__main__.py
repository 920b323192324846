from sumo_cli.cli.app import main

main()
