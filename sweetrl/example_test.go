package sweetrl_test

import (
	"fmt"
	"os"

	"github.com/turnwise/turnwise/sweetrl"
)

// An episode driven by hand: the agent asks one question, the human
// answers, and the agent's next reply gives the final answer.
func ExampleEpisode() {
	task := sweetrl.Task{
		ProblemDescription: "Double a number. The signature of the function is: def double(x)",
		HiddenInformation:  "def double(x):\n    return 2 * x",
	}
	e := sweetrl.NewEpisode(task)
	e.AgentTurn("<prompt 1>", "I need the type. OUTPUT: Is x always an int?")
	e.HumanTurn("Yes, an int.")
	done, _ := e.AgentTurn("<prompt 2>", "OUTPUT: I WANT TO ANSWER:\ndef double(x):\n    return 2 * x")
	fmt.Println(done, e.AgentTurns())
	fmt.Println(e.Answer())
	sweetrl.WriteTrajectories(os.Stdout, e.Trajectory(1))
	// Output:
	// true 2
	// def double(x):
	//     return 2 * x
	// {"task":{"problem_description":"Double a number. The signature of the function is: def double(x)","hidden_information":"def double(x):\n    return 2 * x"},"dialogue_history":[{"role":"user","content":"Double a number. The signature of the function is: def double(x)"},{"role":"assistant","content":" Is x always an int?","input":"<prompt 1>","output":"I need the type. OUTPUT: Is x always an int?"},{"role":"user","content":"Yes, an int."},{"role":"assistant","content":" I WANT TO ANSWER:\ndef double(x):\n    return 2 * x","input":"<prompt 2>","output":"OUTPUT: I WANT TO ANSWER:\ndef double(x):\n    return 2 * x"}],"answer":"def double(x):\n    return 2 * x","reward":1}
}
