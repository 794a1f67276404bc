// Package frontend holds ColBench's frontend design tasks: an agent writes
// a web page in HTML and Tailwind CSS while a vision model, playing the
// human, compares a screenshot of the agent's page with one of the page it
// has in mind; the answer is scored by the cosine of the two screenshots'
// CLIP image embeddings.
//
// Tasks and trajectories are sweetrl's (a frontend row has a
// problem_description and a ground_truth page); the answer of a trajectory
// is the last page the agent wrote. Rendering and embedding come through
// the small interfaces Renderer and Embedder, so that this package depends
// on neither a browser nor a model.
package frontend
